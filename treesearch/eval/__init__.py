"""Evaluation over instance sets: one search per instance, on a local pool or on Ray.

``run_eval(config, instances, ...)`` (or ``run_eval(resume=DIR)``) runs a batch into an eval
directory (see ``batch``); ``load_instances`` reads SWE-bench-format files (see ``instances``).
Nothing here prints: progress goes to an ``on_event`` callback.
"""

from treesearch.eval.batch import EvalError, EvalOutcome, load_eval_config, resume_eval, run_eval
from treesearch.eval.instances import Instance, InstanceFileError, load_instances

__all__ = [
    "EvalError",
    "EvalOutcome",
    "Instance",
    "InstanceFileError",
    "load_eval_config",
    "load_instances",
    "resume_eval",
    "run_eval",
]
