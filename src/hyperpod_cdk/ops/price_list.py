"""The AWS Price List API's on-demand prices for HyperPod cluster instances in a Region.

``GetProducts`` is served from ``us-east-1`` (among a few Regions) for every Region's prices (AWS Price List API,
https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/using-price-list-query-api.html); the caller needs
``pricing:GetProducts``. The filters select SageMaker's HyperPod instance entries of one Region (``regionCode``) whose
usage type contains ``-Cluster:ml.``; :func:`hyperpod_cdk.aws_data.prices.parse_price_list` reads them.
"""

from __future__ import annotations

from typing import Any

from hyperpod_cdk.aws_data.prices import DEFAULT_CURRENCY, Price, parse_price_list

PRICING_REGION = "us-east-1"
SERVICE_CODE = "AmazonSageMaker"


def filters(region: str) -> list[dict[str, str]]:
    return [
        {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
        {"Type": "CONTAINS", "Field": "usagetype", "Value": "-Cluster:ml."},
    ]


def fetch_prices(pricing: Any, region: str, currency: str = DEFAULT_CURRENCY) -> dict[str, Price]:
    """Every HyperPod instance type's price in ``region`` (a ``pricing`` client; every page)."""
    found: dict[str, Price] = {}
    token: str | None = None
    while True:
        request: dict[str, Any] = {"ServiceCode": SERVICE_CODE, "Filters": filters(region), "FormatVersion": "aws_v1"}
        if token:
            request["NextToken"] = token
        page = pricing.get_products(**request)
        found.update(parse_price_list(page.get("PriceList", []), region, currency))
        token = page.get("NextToken")
        if not token:
            return found


def pricing_client(session: Any) -> Any:
    """A ``pricing`` client on the endpoint's Region, whatever Region the session is in."""
    return session.client("pricing", region_name=PRICING_REGION)
