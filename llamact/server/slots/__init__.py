"""The slots family: ``GET /slots`` and ``POST /slots/{id}`` (``routes``), the answer and the file
names (``wire``)."""
