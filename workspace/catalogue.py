"""The suggested attribute catalogue (METHOD.md section 2, Table 1 of the
APPrOVE paper): quality attributes a designer picks from when setting up a
study, each with its one-line definition. A designer may also write their own.
"""

from typing import NamedTuple


class CatalogueAttribute(NamedTuple):
    name: str
    definition: str


# In the paper's (alphabetical) order. The four the case study uses carry the
# definitions of its bundle (workspace/demo/case-study-1.json).
ATTRIBUTE_CATALOGUE: tuple[CatalogueAttribute, ...] = (
    CatalogueAttribute("Accuracy", "correct and precise"),
    CatalogueAttribute("Availability", "able to be used or obtained when needed"),
    CatalogueAttribute("Complexity", "the state of being intricate or complicated"),
    CatalogueAttribute("Comprehensibility", "able to be understood, intelligible"),
    CatalogueAttribute("Consistency", "uniform and free from contradiction"),
    CatalogueAttribute(
        "Efficiency",
        "efficient in terms of the ratio of useful work performed to the total resources expended",
    ),
    CatalogueAttribute("Flexibility", "able to adapt to new, different or changing requirements"),
    CatalogueAttribute("Interpretability", "able to be explained, its results accounted for"),
    CatalogueAttribute("Understandability", "able to be understood; clear in what it does and why"),
)


def catalogue_definition(name: str) -> str | None:
    """The catalogue's definition of the attribute ``name``, or None."""
    for entry in ATTRIBUTE_CATALOGUE:
        if entry.name == name:
            return entry.definition
    return None
