"""Screens: the triage screen and the modals pushed over it."""
