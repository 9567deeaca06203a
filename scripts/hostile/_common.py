"""What several probe modules share (a file whose name starts with _ holds no probes)."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path


def full_disk_child(work: Path, code: str, fsize: int) -> subprocess.CompletedProcess:
    """`code` in a child whose files may not grow past `fsize` bytes (a full disk)."""
    pre = textwrap.dedent(f"""
        import resource, signal, sys
        sys.path.insert(0, {str(work)!r})
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, ({fsize}, resource.RLIM_INFINITY))
    """)
    return subprocess.run([sys.executable, "-c", pre + textwrap.dedent(code)], cwd=work, capture_output=True,
                          text=True, timeout=300)
