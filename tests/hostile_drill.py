"""The hostile-user drill (issue #39, item 6): each way in an ordinary cluster user had (the security review of
2026-12-04, H1-H3 and L6), the local-cluster test that tries it as that user, and what the test shows. The tests
carry the ``hostile`` marker and run in the local tier of ``make test``; ``make drill-hostile`` runs them alone.
A try that succeeds fails its test, so the drill fails. ``tests/test_hostile_drill.py`` checks that each test
exists under the marker and that docs/testing.md lists this table."""

from __future__ import annotations

DRILL: tuple[tuple[str, str, str], ...] = (
    (
        "H1: the instance role's credentials from the metadata service, from a shell on a login, compute and "
        "controller node",
        "tests/test_local_imds.py::test_an_ordinary_user_is_refused_on_every_kind_of_node_and_root_gets_the_keys",
        "refused for the user on every node; root still gets the keys",
    ),
    (
        "H1: the same from a job (srun from the login node, sbatch)",
        "tests/test_local_imds.py::test_a_job_cannot_read_the_credentials_but_one_of_an_allowed_group_can",
        "refused in the job; a member of an allowed group gets them",
    ),
    (
        "H1: the rule gone after a reboot or a second bootstrap",
        "tests/test_local_imds.py::test_a_reboot_keeps_the_rule_and_a_second_bootstrap_leaves_it_alone",
        "still refused after the login node reboots and bootstraps again",
    ),
    (
        "H2: links (directory, file, lock, key, hard link, FIFO) planted in the home before a node bootstraps again",
        "tests/test_local_hostile_home.py::test_a_node_rebootstrapping_follows_no_link_the_user_planted",
        "every target keeps its owner, mode and content; no target's text lands in the home",
    ),
    (
        "H3: a job name and comment that put a command on update-software's requeue line",
        "tests/test_local_update_software.py::test_a_crafted_job_name_and_comment_run_nothing_through_the_requeue_line",
        "the job is requeued; no marker file on the controller",
    ),
    (
        "L6: a held job named like the scaler's held mark, to have the scaler release it",
        "tests/test_local_scaler.py::test_salloc_is_satisfied_by_a_scale_out",
        "the job the user held stays held",
    ),
)
"""(the way in, the test that tries it, what the test shows)."""
