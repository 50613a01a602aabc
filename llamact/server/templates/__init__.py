"""The templates family: ``/apply-template``, ``/template-details``, ``/tokenize``, ``/detokenize``
(``routes``), their bodies and answers (``wire``)."""
