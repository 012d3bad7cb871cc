"""The unit that turns Slurm's billing TRES into money: one definition for the prices (TRESBillingWeights), the
budgets (GrpTRESMins=billing=…) and the ``cost`` report.

Slurm counts a job's usage of the ``billing`` TRES in billing-minutes: the job's billing value (the sum of its
allocated TRES times the partition's ``TRESBillingWeights``) times its run time in minutes. We choose the weights so
that one billing-minute is :data:`BILLING_UNITS_PER_CURRENCY`-th of the cluster's currency unit; then an account's
``GrpTRESMins=billing=N`` is a budget of ``N / BILLING_UNITS_PER_CURRENCY`` in money, and ``sreport``'s billing
figures divide the same way. Stdlib only (the node runtime, Python 3.8+).
"""

from __future__ import annotations

BILLING_UNITS_PER_CURRENCY = 1000
"""Billing-minutes per currency unit: a milli-dollar (for USD) per billing-minute keeps whole numbers for
GrpTRESMins. Slurm rounds a job's billing value down to a whole number (seen with 24.11), so a job's price per
minute is precise to 1/1000 of the currency unit, and a job whose weighted CPUs are below 1 bills nothing
(docs/cost.md, "Precision")."""


def billing_minutes(amount: float) -> int:
    """The ``GrpTRESMins`` billing limit that allows spending ``amount`` in the currency unit (rounded down)."""
    if amount < 0:
        raise ValueError("amount: got {!r}; a budget is zero or more".format(amount))
    return int(amount * BILLING_UNITS_PER_CURRENCY)


def money(billing_minutes_used: float) -> float:
    """The money that ``billing_minutes_used`` billing-minutes (``sacct``/``sreport`` billing usage) stand for."""
    return billing_minutes_used / BILLING_UNITS_PER_CURRENCY


def node_billing_per_minute(price_per_hour: float) -> float:
    """A whole node's billing value (billing units per minute of run time) for an instance price per hour."""
    return price_per_hour * BILLING_UNITS_PER_CURRENCY / 60.0
