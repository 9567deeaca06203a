"""The sycophancy guard (issue 37; docs/METHOD.md 8.8): seeker cases rated for agreement with a false or harmful
belief (agreement), EMPA's perturbation checks per model (echo_lib.epm.robustness), and stage 06b (stage)."""
