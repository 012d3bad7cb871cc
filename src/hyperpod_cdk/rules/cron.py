"""HyperPod's update schedules (``ScheduledUpdateConfig.ScheduleExpression``): the six fields of ``cron(...)`` and the
days a schedule fires on, so that two groups' schedules can be compared. AWS's AMI update page: "we recommend that
you have a time buffer in between schedules. If schedules overlap, updates might fail". Only expressions that
already match the schema's pattern (:data:`hyperpod_cdk.rules.images.SCHEDULE_EXPRESSION_PATTERN`) are parsed: each
field is one value, ``?``, ``*``, ``*/N``, ``L``, ``N#K`` or ``NL``.

The page numbers the days of the week two ways: its table says "1 - 7 or MON-SUN" and its examples run on Mondays
with ``1`` (``cron(00 12 ? * 1 *)``), while its ``#`` wildcard's example counts Sunday as 1 ("3 refers to Tuesday
because it is the third day of each week"). A numbered day is read both ways here, so a comparison never misses
an overlap either reading has."""

from __future__ import annotations

import calendar
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, timedelta

FIELDS = ("minutes", "hours", "day-of-month", "month", "day-of-week", "year")
"""The six fields, in order, as AWS's AMI update page names them ("All six fields are required")."""
YEAR_MAX = 2099
"""The table's last year ("Current year - 2099", an en dash there)."""
HORIZON_YEARS = 8
"""How many years from the current one a recurring schedule (year ``*``) is expanded over to compare it."""
WEEKDAYS = ("MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN")
"""Python's weekday order (Monday 0)."""


def today() -> date:
    """The clock the year check and the expansion start from (one place, for tests)."""
    return date.today()


@dataclass(frozen=True)
class Schedule:
    """A parsed ``cron(minutes hours day-of-month month day-of-week year)``; fields as written."""

    fields: tuple[str, ...]

    @property
    def minute_of_day(self) -> int:
        return int(self.fields[1]) * 60 + int(self.fields[0])

    @property
    def empty(self) -> list[str]:
        """The names of the fields left empty (the schema's pattern lets minutes, month and year be empty)."""
        return [name for name, value in zip(FIELDS, self.fields, strict=True) if value == ""]

    @property
    def year(self) -> int | None:
        value = self.fields[5]
        return int(value) if value.isdigit() else None


def parse(expression: str) -> Schedule:
    """The fields of ``cron(...)``: the schema's pattern separates them by single spaces."""
    return Schedule(tuple(expression[len("cron(") : -1].split(" ")))


def _months(value: str) -> list[int]:
    if value.startswith("*/"):
        return list(range(1, 13, int(value[2:])))
    return list(range(1, 13)) if value == "*" else [int(value)]


def _weekdays(number: str) -> set[int]:
    """Python weekdays a day of the week names: a name one, a number both of the page's readings (Monday 1 or
    Sunday 1)."""
    if number in WEEKDAYS:
        return {WEEKDAYS.index(number)}
    n = int(number)
    return {n - 1, (n - 2) % 7}


def _week_days(value: str, year: int, month: int) -> set[int]:
    """Days of ``month`` the day-of-week field names."""
    weeks = calendar.monthcalendar(year, month)
    if value == "L":  # the last day of the week: Saturday or Sunday, by the page's two numberings
        return {w[d] for w in weeks for d in (5, 6) if w[d]}
    if "#" in value:
        number, nth = value.split("#")
        found: set[int] = set()
        for weekday in _weekdays(number):
            days = [w[weekday] for w in weeks if w[weekday]]
            found |= {days[int(nth) - 1]} if int(nth) <= len(days) else set()
        return found
    if value.endswith("L"):
        return {[w[d] for w in weeks if w[d]][-1] for d in _weekdays(value[:-1])}
    return {w[d] for w in weeks for d in _weekdays(value) if w[d]}


def fires_on(schedule: Schedule, years: Iterable[int]) -> set[date]:
    """The days of ``years`` the schedule fires on (a year given in the expression replaces ``years``). A day of the
    month and a day of the week both given are either (cron's reading); both ``?`` is every day."""
    _minutes, _hours, day, month, weekday, _year = schedule.fields
    found: set[date] = set()
    for y in [schedule.year] if schedule.year is not None else years:
        for m in _months(month or "*"):
            last = calendar.monthrange(y, m)[1]
            days: set[int] = set()
            if day not in ("?", ""):
                days |= {int(day)} if int(day) <= last else set()
            if weekday not in ("?", ""):
                days |= _week_days(weekday, y, m)
            if day in ("?", "") and weekday in ("?", ""):
                days = set(range(1, last + 1))
            found |= {date(y, m, d) for d in days}
    return found


def closest(first: Schedule, second: Schedule, within: int) -> tuple[int, date] | None:
    """Minutes from a firing of ``first`` to the nearest firing of ``second`` when that is under ``within`` minutes
    (negative: ``second`` fires before), with a day ``first`` fires on then (the next one from today where there is
    one); None when they are always further apart."""
    start = today().year
    fixed = {s.year for s in (first, second) if s.year is not None}  # a one-time schedule's year, for the other's *
    years = sorted(set(range(start, min(start + HORIZON_YEARS, YEAR_MAX) + 1)) | fixed)
    ours, theirs = fires_on(first, years), fires_on(second, years)
    delta = second.minute_of_day - first.minute_of_day
    for shift in sorted((-1, 0, 1), key=lambda s: abs(s * 1440 + delta)):
        gap = shift * 1440 + delta
        if abs(gap) >= within:
            continue
        days = sorted(d for d in ours if d + timedelta(days=shift) in theirs)
        if days:
            coming = [d for d in days if d >= today()]
            return gap, (coming or days)[0]
    return None
