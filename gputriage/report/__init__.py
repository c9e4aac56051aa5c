"""Incident summaries (Markdown, JSON) built from a walk transcript. Pure functions."""
