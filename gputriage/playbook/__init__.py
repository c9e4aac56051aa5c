"""Playbooks: YAML diagnosis trees, their loader, and the pure engine that walks them."""
