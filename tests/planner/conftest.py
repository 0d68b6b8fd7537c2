import pytest

from profiles import load_catalog


@pytest.fixture(scope="session")
def catalog():
    return load_catalog()


@pytest.fixture(scope="session")
def prior_catalog(catalog):
    """The catalogue without its acceptance library: every method drafts with its prior (methods.yaml's ranges,
    workload and language shifts). For tests of the mechanisms built on the prior (the grid's arithmetic, K by
    workload, levers, trees); the library's tiers are tested in test_acceptance_library.py."""
    import dataclasses

    return dataclasses.replace(catalog, acceptance_library=None)
