"""Executors: where instances run. A local process pool (the default) or Ray (optional extra).

Both call ``runner.run_instance`` for each instance and hand each result back to the driver
(``on_result``) as it arrives; only the driver writes the eval directory. A result is either an
``InstanceReport`` or the exception that ended the task (a worker that died, say). An instance
interrupted by Ctrl-C produces no result at all: it is not finished, ``--resume`` redoes it.

Ctrl-C in the driver: nothing new starts, running instances get SIGINT (a pool worker) or are
cancelled (Ray), their searches stop at the next step, and the driver re-raises
``KeyboardInterrupt`` once they are gone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from typing import Any

from treesearch.errors import TreesearchError
from treesearch.eval.environment import Known
from treesearch.eval.instances import Instance
from treesearch.eval.runner import EvalSettings, InstanceInterrupted, InstanceReport, run_instance

__all__ = ["ExecutorError", "run_local", "run_ray"]

OnResult = Callable[[str, "InstanceReport | BaseException"], None]


class ExecutorError(TreesearchError):
    """The executor cannot run (Ray missing, a cluster that cannot be joined)."""


_busy = False
_stopping = False
_parent = 0


def _worker_init() -> None:
    # An idle worker ignores Ctrl-C (the driver decides); a busy one stops its search, once: a
    # second SIGINT (the terminal's and the driver's) must not cut the search's own clean-up.
    global _parent
    _parent = os.getppid()

    def on_sigint(signum: int, frame: Any) -> None:
        global _stopping
        if not _busy and os.getppid() != _parent:
            os._exit(1)  # the driver is gone: nothing will ever come to this idle worker
        if _busy and not _stopping:
            _stopping = True
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)
    # Linux: a driver killed outright (SIGKILL) sends its workers SIGINT, so that an orphaned
    # search stops cleanly instead of running on for nothing (its result could not be kept).
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGINT))  # PR_SET_PDEATHSIG


def _pool_task(inst: Instance, settings: EvalSettings, known: Known | None) -> InstanceReport:
    global _busy, _stopping
    _busy, _stopping = True, False
    try:
        return run_instance(inst, settings, known)
    finally:
        _busy = False
        if os.getppid() != _parent:
            os._exit(1)  # orphaned (the driver was killed): its result cannot be kept


STOP_GRACE = 60.0
"""Seconds running instances get to stop after Ctrl-C before their worker is terminated."""


def run_local(
    jobs: Sequence[Instance],
    settings: EvalSettings,
    workers: int,
    on_result: OnResult,
    known: Mapping[str, Known] | None = None,
) -> None:
    """Run ``jobs`` on a pool of ``workers`` processes (started fresh with ``spawn``), started
    in the order given. ``known``: what the driver looked up for each (by instance id)."""
    known = known or {}
    pool = ProcessPoolExecutor(
        max_workers=max(1, workers), mp_context=get_context("spawn"), initializer=_worker_init
    )
    futures: dict[Future[InstanceReport], str] = {
        pool.submit(_pool_task, inst, settings, known.get(inst.instance_id)): inst.instance_id
        for inst in jobs
    }
    try:
        for fut in as_completed(futures):
            iid = futures[fut]
            try:
                report = fut.result()
            except InstanceInterrupted:
                continue
            except BaseException as exc:  # noqa: BLE001 - a dead worker is that instance's error
                on_result(iid, exc)
                continue
            on_result(iid, report)
    except KeyboardInterrupt:
        for fut in futures:
            fut.cancel()
        procs = list((getattr(pool, "_processes", None) or {}).values())
        for proc in procs:
            with contextlib.suppress(OSError, AttributeError, TypeError):
                os.kill(proc.pid, signal.SIGINT)
        pool.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + STOP_GRACE
        for proc in procs:
            proc.join(max(0.0, deadline - time.monotonic()))
        for proc in procs:
            if proc.is_alive():  # a search that did not stop in time
                proc.terminate()
                proc.join(5)
        raise
    pool.shutdown(wait=True)


def _ray_task(inst: Instance, settings: EvalSettings, known: Known | None) -> InstanceReport:
    return run_instance(inst, settings, known)


def run_ray(
    jobs: Sequence[Instance],
    settings: EvalSettings,
    workers: int,
    address: str | None,
    on_result: OnResult,
    known: Mapping[str, Known] | None = None,
) -> None:
    """Run each instance as a Ray task (one CPU each), submitted in the order given. Joins
    ``address`` when given; else uses the Ray already initialised in this process, or starts a
    local one with ``workers`` CPUs. ``known``: what the driver looked up for each."""
    known = known or {}
    try:
        import ray
    except ImportError:
        raise ExecutorError(
            "--executor ray needs Ray: install it with `pip install -e '.[ray]'` "
            "(or `pip install 'ray>=2.9'`)"
        ) from None
    started = False
    if not ray.is_initialized():
        try:
            if address:
                ray.init(address=address, include_dashboard=False, log_to_driver=False)
            else:
                ray.init(num_cpus=max(1, workers), include_dashboard=False, log_to_driver=False)
        except Exception as exc:  # noqa: BLE001 - any start/join failure is one message
            where = f"join the Ray cluster at {address}" if address else "start a local Ray"
            raise ExecutorError(f"cannot {where}: {exc}") from None
        started = True
    remote = ray.remote(num_cpus=1, max_retries=0)(_ray_task)
    refs = {
        remote.remote(inst, settings, known.get(inst.instance_id)): inst.instance_id
        for inst in jobs
    }
    pending = list(refs)
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                iid = refs[ref]
                try:
                    report = ray.get(ref)
                except ray.exceptions.TaskCancelledError:
                    continue
                except ray.exceptions.RayTaskError as exc:
                    cause = getattr(exc, "cause", None)
                    if isinstance(cause, (InstanceInterrupted, KeyboardInterrupt)):
                        continue
                    on_result(iid, cause if isinstance(cause, BaseException) else exc)
                    continue
                except Exception as exc:  # noqa: BLE001 - a lost worker is that instance's error
                    on_result(iid, exc)
                    continue
                on_result(iid, report)
    except KeyboardInterrupt:
        for ref in pending:
            with contextlib.suppress(Exception):
                ray.cancel(ref)
        with contextlib.suppress(Exception):
            ray.wait(pending, num_returns=len(pending), timeout=30)
        raise
    finally:
        if started:
            with contextlib.suppress(Exception):
                ray.shutdown()
