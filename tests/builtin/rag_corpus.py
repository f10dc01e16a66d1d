"""A small corpus with known answers, for the retrieval-quality tests (recall@3)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from rx_agent import Document, Passage

DOCUMENTS = [
    Document(source="refunds.md", metadata={"lang": "en", "team": "billing"}, text=(
        "Refund policy. Customers can ask for a refund within 30 days of purchase. "
        "Refunds are paid back to the original payment method within five business "
        "days. Gift cards cannot be refunded.")),
    Document(source="shipping.md", metadata={"lang": "en", "team": "logistics"}, text=(
        "Shipping. Standard shipping takes three to seven days inside the country. "
        "Express shipping arrives the next working day when the order is placed before "
        "noon. International parcels may be held by customs.")),
    Document(source="passwords.md", metadata={"lang": "en", "team": "support"}, text=(
        "Resetting a password. Open the sign-in page and choose 'Forgot password'. A "
        "reset link is emailed to you and expires after one hour. Passwords need at "
        "least twelve characters.")),
    Document(source="warranty.md", metadata={"lang": "en", "team": "support"}, text=(
        "Warranty. Every appliance carries a two-year warranty covering manufacturing "
        "defects. Damage from drops, water or misuse is not covered. Keep the receipt "
        "as proof of purchase.")),
    Document(source="office.md", metadata={"lang": "en", "team": "hr"}, text=(
        "Office hours. The Berlin office is open from eight to six on weekdays. Visitors "
        "sign in at reception and receive a badge. The canteen serves lunch at noon.")),
    Document(source="vacation.md", metadata={"lang": "en", "team": "hr"}, text=(
        "Vacation. Employees receive twenty-eight vacation days per year. Unused "
        "vacation days carry over until the end of March. Request leave in the HR "
        "portal two weeks ahead.")),
    Document(source="security.md", metadata={"lang": "en", "team": "security"}, text=(
        "Two-factor authentication. Enable two-factor authentication in the account "
        "settings with an authenticator app. Backup codes let you sign in when the "
        "phone is lost; store them offline.")),
    Document(source="invoices.md", metadata={"lang": "en", "team": "billing"}, text=(
        "Invoices. An invoice is created for every order and can be downloaded as a "
        "PDF from the orders page. Companies can add a VAT number to their invoices "
        "in the billing settings.")),
    Document(source="api-limits.md", metadata={"lang": "en", "team": "platform"}, text=(
        "API rate limits. Each API key may send 600 requests per minute. Requests over "
        "the limit get HTTP status 429 with a Retry-After header; clients should back "
        "off and retry.")),
    Document(source="erstattung.md", metadata={"lang": "de", "team": "billing"}, text=(
        "Erstattung. Kunden erhalten eine Erstattung innerhalb von 30 Tagen nach dem "
        "Kauf. Gutscheine werden nicht erstattet.")),
    Document(source="recycling.md", metadata={"lang": "en", "team": "facilities"}, text=(
        "Recycling. Batteries and electronics go to the collection box next to "
        "reception. Paper and cardboard are collected on Fridays.")),
    Document(source="deploy.md", metadata={"lang": "en", "team": "platform"}, text=(
        "Deployments. Production deployments run every Tuesday and Thursday after the "
        "test suite passes. A rollback restores the previous release within ten "
        "minutes.")),
]

QUESTIONS: list[tuple[str, str]] = [
    ("How many days do I have to ask for a refund?", "refunds.md"),
    ("How long does express shipping take?", "shipping.md"),
    ("I forgot my password, how do I reset it?", "passwords.md"),
    ("Is water damage covered by the warranty?", "warranty.md"),
    ("When is the Berlin office open?", "office.md"),
    ("How many vacation days do employees get per year?", "vacation.md"),
    ("How do I enable two-factor authentication?", "security.md"),
    ("Where can I download the PDF invoice for my order?", "invoices.md"),
    ("What happens when the API rate limit is exceeded?", "api-limits.md"),
    ("Where do old batteries go for recycling?", "recycling.md"),
    ("How fast can a production deployment be rolled back?", "deploy.md"),
]

Search = Callable[[str, int], Awaitable[Sequence[Passage]]]


async def recall_at(search: Search, k: int = 3) -> tuple[float, list[str]]:
    """recall@k over :data:`QUESTIONS`, and the questions it missed."""
    missed = []
    for question, expected in QUESTIONS:
        found = [p.source for p in await search(question, k)]
        if expected not in found:
            missed.append(f"{question!r}: expected {expected}, got {found}")
    return 1 - len(missed) / len(QUESTIONS), missed
