"""What every family's body shares: llama-server's field table (``fields``), the defaults and the
generation fields (``request``), raw prompts (``prompts``), logprobs entries (``logprobs``) and a
request's settings as llama-server reports them (``task_params``)."""
