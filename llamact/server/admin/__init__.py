"""The admin family: health, models, props, metrics, LoRA adapters, router mode's model routes, the
page and the refused features (``routes``); ``/props``' body (``wire``)."""
