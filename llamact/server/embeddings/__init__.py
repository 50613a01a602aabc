"""The embeddings family: ``/v1/embeddings``, ``/embeddings`` and ``/rerank`` (``routes``), their
bodies and answers (``wire``)."""
