"""The scaler's deletes: ``BatchDeleteClusterNodes`` sent, and each delete settled against ``ListClusterNodes``.

AWS answers a delete per node: ``Successful`` ids, and ``Failed`` entries whose ``Code`` is ``NodeIdNotFound``,
``InvalidNodeStatus`` or ``NodeIdInUse`` ("the node not being found, the node's status being invalid for deletion,
or the node ID being in use by another process", API_BatchDeleteClusterNodesError). What the scaler does:

* **answered, per node**: a deleted node stays in flight until ``ListClusterNodes`` no longer lists it; a node the
  answer refused goes back to Slurm (``State=RESUME``), and the refusal counts as a failure, so the next delete
  waits for the backoff (no drain, delete, resume loop every cycle);
* **refused as a whole** (validation, auth, throttling, no credentials): nothing was deleted; its nodes go back to
  Slurm, and the next delete waits for the backoff;
* **no answer** (a network error or a 5xx after the client's retries) or **never returned** (the controller
  restarted mid-call): HyperPod may be deleting the nodes. They stay in flight and drained, never given back to
  Slurm on a guess. Each cycle re-lists them: one no longer listed is deleted; while any is listed in another status
  than ``Running`` (``ShuttingDown``…) the delete is under way; when all are listed ``Running`` after the backoff,
  the delete is sent again for those Slurm still shows drained by the scaler and idle. An answer that refuses a node
  with ``InvalidNodeStatus`` or ``NodeIdInUse`` may mean the first call is deleting it: it stays in flight and is
  tried again after the backoff.

A delete still listed :data:`DELETE_TTL_S` after it started is dropped (``scaler_delete_expired``): its nodes stay
drained with the scaler's reason, so the policy decides about them afresh.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from training_runtime.log import log
from training_runtime.scaler import policy
from training_runtime.scaler.config import ScalerConfig
from training_runtime.scaler.policy import DELETE, DeleteNode
from training_runtime.scaler.sagemaker import UNKNOWN_OUTCOME, VALIDATION, ApiError, DeleteResult, Node, SageMaker
from training_runtime.scaler.slurm_view import Slurm
from training_runtime.scaler.state import Operation, State

RUNNING = "Running"
"""``ListClusterNodes`` ``InstanceStatus.Status`` of a node no delete is working on."""
GONE = "NodeIdNotFound"
DELETE_TTL_S = 8 * 3600.0


class Deletes:
    """The delete half of :class:`~training_runtime.scaler.service.Scaler` (a mixin: it uses the scaler's state,
    clients, :meth:`_fail` and :meth:`_save`)."""

    config: ScalerConfig
    sagemaker: SageMaker
    slurm: Slurm
    state: State
    _fail: Callable[[Exception, str, float], None]
    _save: Callable[[], None]

    def _delete(self, call: List[DeleteNode], names: Mapping[str, Tuple[str, str]], now: float) -> None:
        """Send one delete (the nodes Slurm confirmed DRAINED by the scaler), recorded in flight before the call."""
        by_group: Dict[str, List[DeleteNode]] = {}
        for item in call:
            by_group.setdefault(item.group, []).append(item)
        ids = [names[d.node][1] for d in call]
        token = policy.delete_token(self.config.cluster_name, call)
        ops = [
            Operation(DELETE, g, len(items), token, nodes=[d.node for d in items],
                      instance_ids=[names[d.node][1] for d in items], started=now)
            for g, items in sorted(by_group.items())
        ]  # fmt: skip
        self.state.in_flight.extend(ops)
        self._save()  # before the call: a restart finds it (sent False: settled by the listing)
        result: Optional[DeleteResult] = None
        try:
            result = self.sagemaker.batch_delete(self.config.cluster_name, ids)
        except ApiError as error:
            self._fail(error, "BatchDeleteClusterNodes", now)
            if error.kind in UNKNOWN_OUTCOME:
                for op in ops:
                    log("scaler_delete_unknown", group=op.group, nodes=op.nodes, instance_ids=op.instance_ids)
                self._save()
                return
        failed = set(ids) if result is None else set(result.failed)
        if result is not None and result.failed:
            code, _, message = next(iter(result.failed.values())).partition(": ")
            self._fail(ApiError(VALIDATION, code, message), "BatchDeleteClusterNodes", now)
        for op in ops:
            op.sent = True
            gone = [name for index, name in enumerate(op.nodes) if op.instance_ids[index] in failed]
            for name in gone:  # refused (the call, or this node): nothing is deleting it, give it back to Slurm
                self.slurm.resume(name)
                log("scaler_delete_failed", node=name,
                    reason=(result.failed.get(names[name][1]) if result else "call refused"))  # fmt: skip
            op.nodes = [n for n in op.nodes if n not in gone]
            op.instance_ids = [i for i in op.instance_ids if i not in failed]
            op.count = len(op.nodes)
            self.state.totals["deleted"] += op.count
            if op.count:
                log("scaler_delete", group=op.group, nodes=op.nodes, instance_ids=op.instance_ids)
        self.state.in_flight = [op for op in self.state.in_flight if op.kind != DELETE or op.count > 0]
        self._save()

    def _settle_delete(self, op: Operation, listed: Mapping[str, Node], now: float) -> Optional[Operation]:
        """``op`` after this cycle's listing: None when it is over (its nodes are gone, or it expired)."""
        still = [i for i in op.instance_ids if i in listed]
        if not still:
            log("scaler_delete_done", group=op.group, nodes=op.nodes)
            return None
        if now - op.started > DELETE_TTL_S:
            log("scaler_delete_expired", group=op.group, nodes=op.nodes, instance_ids=still)
            return None
        if op.sent or now < self.state.next_try or any(listed[i].status != RUNNING for i in still):
            return op
        by_id = {op.instance_ids[k]: op.nodes[k] for k in range(len(op.nodes))}
        ready = [i for i in still if self.slurm.confirmed_drained(by_id[i])]
        if ready:
            self._resend(op, ready, now)
        return op

    def _resend(self, op: Operation, ids: Sequence[str], now: float) -> None:
        """The delete again, for nodes listed ``Running`` after a call whose outcome is unknown."""
        try:
            result = self.sagemaker.batch_delete(self.config.cluster_name, list(ids))
        except ApiError as error:
            self._fail(error, "BatchDeleteClusterNodes", now)
            return
        doubtful = {i: why for i, why in result.failed.items() if not why.startswith(GONE)}
        op.sent = not doubtful
        log("scaler_delete_resent", group=op.group, nodes=op.nodes, refused=sorted(doubtful))
        if doubtful:  # maybe the first call is deleting them: never given back, tried again after the backoff
            code, _, message = next(iter(doubtful.values())).partition(": ")
            self._fail(ApiError(VALIDATION, code, message), "BatchDeleteClusterNodes", now)


def listed_by_id(listed: Sequence[Node]) -> Dict[str, Node]:
    return {n.instance_id: n for n in listed}
