"""Figures and tables for the paper, drawn from the stages' result files."""
