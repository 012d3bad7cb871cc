"""The unit that turns Slurm's billing TRES into money: one definition for the prices (TRESBillingWeights), the
budgets (GrpTRESMins=billing=…) and the ``cost`` report.

Slurm counts a job's usage of the ``billing`` TRES in billing-minutes: the job's billing value (the sum of its
allocated TRES times the partition's ``TRESBillingWeights``) times its run time in minutes. We choose the weights so
that one billing-minute is :data:`BILLING_UNITS_PER_CURRENCY`-th of the cluster's currency unit; then an account's
``GrpTRESMins=billing=N`` is a budget of ``N / BILLING_UNITS_PER_CURRENCY`` in money, and ``sreport``'s billing
figures divide the same way. Stdlib only (the node runtime, Python 3.8+).
"""

from __future__ import annotations

BILLING_UNITS_PER_CURRENCY = 100_000
"""Billing-minutes per currency unit: 1/100,000 of the currency (a thousandth of a cent for USD) per billing-minute.
Slurm rounds a job's billing value down to a whole number (seen with 24.11), so the unit must be small enough that
a priced CPU weighs 1 or more: at 1/1000 an ml.c5.4xlarge at its on-demand price weighed about 0.85 and a 1-CPU job
billed nothing; at 1/100,000 it weighs about 85, and the rounding loses at most one unit (1/100,000 of the
currency) per job-minute. Budgets stay far inside Slurm's 64-bit TRES-minute counters: 10^9 of the currency is
10^14 billing-minutes (docs/cost.md, "Precision")."""


def billing_minutes(amount: float) -> int:
    """The ``GrpTRESMins`` billing limit that allows spending ``amount`` in the currency unit (rounded down)."""
    if amount < 0:
        raise ValueError("amount: got {!r}; a budget is zero or more".format(amount))
    # Rounded to 6 decimals first: 0.03226 x 100,000 is 3225.9999999999995 in binary floating point, not 3225.
    return int(round(amount * BILLING_UNITS_PER_CURRENCY, 6))


def money(billing_minutes_used: float) -> float:
    """The money that ``billing_minutes_used`` billing-minutes (``sacct``/``sreport`` billing usage) stand for."""
    return billing_minutes_used / BILLING_UNITS_PER_CURRENCY


def node_billing_per_minute(price_per_hour: float) -> float:
    """A whole node's billing value (billing units per minute of run time) for an instance price per hour."""
    return price_per_hour * BILLING_UNITS_PER_CURRENCY / 60.0
