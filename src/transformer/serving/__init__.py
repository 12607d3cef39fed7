"""``transformer serve``: the HTTP API (translate, attention, classify) with dynamic batching, and
the web page at ``/``. Needs the ``serve`` extra (FastAPI and uvicorn)."""
