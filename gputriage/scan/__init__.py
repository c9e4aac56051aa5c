"""Fleet views: ``gputriage scan`` (GPU pods and nodes in trouble) and ``gputriage node``.

Core package: no Textual, no Kubernetes client. Listing goes through any object with the
:class:`gputriage.scan.collect.Lister` shape (the command hands it the kube source's client).
"""
