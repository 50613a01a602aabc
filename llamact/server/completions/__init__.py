"""The completions family: ``/v1/completions``, raw prompts in OpenAI's shape (``routes``), and the
raw completion body every raw route reads (``wire``)."""
