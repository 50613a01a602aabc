"""Where requests run: a ``Job`` per request (``job``: its typed event queue), on an engine's
worker threads (``worker.EngineWorker``) or a batch scheduler's slots (``slot_runner.SlotRunner``)."""
