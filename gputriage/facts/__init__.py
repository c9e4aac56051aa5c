"""Facts: normalised views of evidence that playbooks reason over.

Each fact group (``pod``, ``scheduler``, ``kernel``, ``gpus``...) lives in its own module and is
declared with a :class:`~gputriage.facts.model.GroupSpec` listing every field, its type and
meaning. ``build_facts`` runs every group builder over an :class:`EvidenceSet`.
"""
