"""The model lifecycle: which models the server offers (``catalogue``), which are loaded and who
holds them (``model_router``), which model a request gets (``dispatch``), and what the server holds
for one loaded model (``state``: engine, runner, defaults; ``metrics``; ``slot_tasks``)."""
