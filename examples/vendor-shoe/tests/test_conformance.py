"""The CS-9 driver passes tablectl's conformance kit (the `tablectl_conformance` fixture of
tablectl's pytest plugin). Run: `pytest --tablectl-conformance-report reports/`."""


def test_the_cs9_driver_conforms_on_its_simulator(tablectl_conformance):
    report = tablectl_conformance("shoe", "acme-cs9")
    assert report.passed, report.markdown()
