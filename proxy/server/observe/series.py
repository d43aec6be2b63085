"""Counters, histograms and gauges updated by plain arithmetic, exported by one collector.

prometheus_client's own metrics take a lock on every update and walk a histogram's buckets in
Python. Here a series is a slotted object whose fields are added to in place: the proxy records
from one thread (the event loop), and `Families.collect` builds the metric families only when
`/metrics` is scraped, rendering what prometheus_client's `Counter`, `Histogram` and `Gauge` would
(the same samples, `_created` included). A series exists from its first `labels(...)` call and is
exported from then on, at 0 until something is added; families, and each family's series, are
exported in the order they were created.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Iterator
from itertools import accumulate
from typing import TypeVar

from prometheus_client import metrics as client_metrics
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

_F = TypeVar("_F", "Counter", "Histogram", "Gauge")


class CounterSeries:
    """One counter series: add to `value` (never a negative amount)."""

    __slots__ = ("created", "value")

    def __init__(self) -> None:
        self.value = 0.0
        self.created = time.time()


class HistogramSeries:
    """One histogram series: the count of each bucket on its own (the last is +Inf) and the sum."""

    __slots__ = ("bounds", "counts", "created", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0
        self.created = time.time()

    def observe(self, value: float) -> None:
        # Buckets are `le`: a value equal to a bound belongs to that bound's bucket, the index
        # `bisect_left` returns; a value above the last bound lands in +Inf.
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value


class Counter:
    """A counter family (`name` without `_total`): its series by label values."""

    def __init__(self, name: str, doc: str, labelnames: tuple[str, ...]) -> None:
        self.name, self.doc, self.labelnames = name, doc, labelnames
        self.series: dict[tuple[str, ...], CounterSeries] = {}

    def labels(self, *values: str) -> CounterSeries:
        series = self.series.get(values)
        if series is None:
            series = self.series[values] = CounterSeries()
        return series

    def collect(self, *, created: bool) -> Metric:
        family = CounterMetricFamily(self.name, self.doc, labels=self.labelnames)
        for values, series in self.series.items():
            family.add_metric(values, series.value, created=series.created if created else None)
        return family


class Histogram:
    """A histogram family with fixed finite upper bounds (+Inf is implied)."""

    def __init__(
        self, name: str, doc: str, labelnames: tuple[str, ...], *, bounds: tuple[float, ...]
    ) -> None:
        self.name, self.doc, self.labelnames = name, doc, labelnames
        self.bounds = tuple(float(bound) for bound in bounds)
        self._les = [*map(floatToGoString, self.bounds), "+Inf"]
        self.series: dict[tuple[str, ...], HistogramSeries] = {}

    def labels(self, *values: str) -> HistogramSeries:
        series = self.series.get(values)
        if series is None:
            series = self.series[values] = HistogramSeries(self.bounds)
        return series

    def collect(self, *, created: bool) -> Metric:
        family = HistogramMetricFamily(self.name, self.doc, labels=self.labelnames)
        for values, series in self.series.items():
            buckets = list(zip(self._les, accumulate(series.counts), strict=True))
            family.add_metric(values, buckets, series.sum)
            if created:
                labels = dict(zip(self.labelnames, values, strict=True))
                family.samples.append(Sample(self.name + "_created", labels, series.created))
        return family


class Gauge:
    """A gauge without labels: set `value`."""

    def __init__(self, name: str, doc: str) -> None:
        self.name, self.doc, self.value = name, doc, 0.0

    def collect(self, *, created: bool) -> Metric:
        return GaugeMetricFamily(self.name, self.doc, value=self.value)


class Families(Collector):
    """The collector to register in a `CollectorRegistry`: every family made by its factories."""

    def __init__(self) -> None:
        self._families: list[Counter | Histogram | Gauge] = []

    def counter(self, name: str, doc: str, *labelnames: str) -> Counter:
        return self._add(Counter(name, doc, labelnames))

    def histogram(
        self, name: str, doc: str, *labelnames: str, bounds: tuple[float, ...]
    ) -> Histogram:
        return self._add(Histogram(name, doc, labelnames, bounds=bounds))

    def gauge(self, name: str, doc: str) -> Gauge:
        return self._add(Gauge(name, doc))

    def _add(self, family: _F) -> _F:
        self._families.append(family)
        return family

    def collect(self) -> Iterator[Metric]:
        # prometheus_client's switch for `_created` samples (PROMETHEUS_DISABLE_CREATED_SERIES,
        # `disable_created_metrics()`), read per scrape as its own metrics do.
        created = client_metrics._use_created
        for family in self._families:
            yield family.collect(created=created)
