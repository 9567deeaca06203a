"""Stage 03: affective RL of the policy with the generative reward models (METHOD.md 4)."""
