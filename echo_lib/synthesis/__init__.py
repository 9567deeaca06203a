"""Data for the reward models: humanlike items from real human chit-chat, empathy preferences by
"axioms -> theorems", and the human-in-the-loop check (METHOD.md 2.2-2.5)."""
