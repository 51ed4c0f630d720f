"""Evaluation over instance sets: one search per instance, on a local pool or on Ray.

``run_eval(config, instances, ...)`` (or ``run_eval(resume=DIR)``) runs a batch into an eval
directory (see ``batch``); ``mode="gold"``, ``"empty"`` or ``"predictions"`` grades patches without
a search, as SWE-bench's harness grades them (``grade``, ``swebench_grading``).
``load_instances`` reads SWE-bench-format files (see ``instances``), ``load_predictions`` SWE-bench
predictions files, ``load_setup_table`` set-up tables (see ``setup_table``).
Nothing here prints: progress goes to an ``on_event`` callback.
"""

from treesearch.eval.batch import EvalError, EvalOutcome, load_eval_config, resume_eval, run_eval
from treesearch.eval.instances import Instance, InstanceFileError, load_instances
from treesearch.eval.predictions import Prediction, PredictionsFileError, load_predictions
from treesearch.eval.setup_table import SetupTable, SetupTableError, load_setup_table

__all__ = [
    "EvalError",
    "EvalOutcome",
    "Instance",
    "InstanceFileError",
    "Prediction",
    "PredictionsFileError",
    "SetupTable",
    "SetupTableError",
    "load_eval_config",
    "load_instances",
    "load_predictions",
    "load_setup_table",
    "resume_eval",
    "run_eval",
]
