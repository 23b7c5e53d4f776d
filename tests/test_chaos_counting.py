"""The chaos suite's count of executions per task, on log records shaped as the driver writes
them (agent.drivers.real.driver: llm.call with the node, then llm.answer or llm.cancelled by
ticket)."""

from support.chaos import executions


def call(ticket, node, kind="execute"):
    return {"event": "llm.call", "ticket": ticket, "kind": kind, "node_id": node}


def test_a_call_cancelled_before_it_answered_is_a_lost_race_not_an_execution():
    # the records of the full run where the loser's call was cancelled 17 ms in
    records = {
        "executor-1": [call(7, "n/1"), {"event": "llm.cancelled", "ticket": 7}],
        "executor-2": [call(4, "n/0"), {"event": "llm.answer", "ticket": 4, "kind": "execute"},
                       call(7, "n/1"), {"event": "llm.answer", "ticket": 7, "kind": "execute"}],
    }
    spent, cancelled = executions(records)
    assert spent == {"n/0": {"executor-2"}, "n/1": {"executor-2"}}
    assert cancelled == {"n/1": {"executor-1"}}


def test_two_executors_answering_or_still_at_work_on_one_task_both_count():
    records = {
        "executor-1": [call(3, "n/1"), {"event": "llm.answer", "ticket": 3, "kind": "execute"}],
        "executor-2": [call(9, "n/1")],  # in flight while the run is watched
    }
    spent, cancelled = executions(records)
    assert spent == {"n/1": {"executor-1", "executor-2"}} and cancelled == {}
    # a cancel of another ticket, or a call of another kind, changes nothing
    records["executor-2"] += [{"event": "llm.cancelled", "ticket": 8}, call(10, "n/2", kind="synthesize")]
    assert executions(records)[0] == {"n/1": {"executor-1", "executor-2"}}


def test_a_synthesis_is_a_task_too_when_asked_for():
    """An executor holds a parent to synthesize it as it holds a leaf to execute it: counted
    with ``TASK_KINDS``, two executors synthesizing one parent show, as two executing a leaf do."""
    from support.calls import TASK_KINDS

    records = {
        "executor-1": [call(3, "n/0"), {"event": "llm.answer", "ticket": 3}, call(5, "p", kind="synthesize")],
        "executor-2": [call(4, "p", kind="synthesize"), {"event": "llm.answer", "ticket": 4}],
    }
    assert executions(records)[0] == {"n/0": {"executor-1"}}
    assert executions(records, TASK_KINDS)[0] == {"n/0": {"executor-1"}, "p": {"executor-1", "executor-2"}}
