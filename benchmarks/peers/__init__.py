"""The peers benchmark: one long-lived worker per framework, driven by ``benchmarks/peers.py``.

``setup`` creates each peer's pinned venv, ``client`` starts a worker and speaks the
JSON-lines protocol that ``_worker`` serves; ``worker_<framework>.py`` are the workers.
"""
