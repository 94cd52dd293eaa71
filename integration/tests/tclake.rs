//! The conformance suite on a `tclake://` volume: the local catalog
//! (scripts/tclake_catalog.py) resolves it to a prefix of the Garage bucket,
//! reached through the COS flavour of S3 with the volume's temporary
//! credentials.
cairn_conformance::conformance_suite!(
    cairn_conformance::Target::tclake,
    buckets: ignore = "a tclake volume is one root: there is no second bucket to copy to or a missing one to name (tclake_catalog.rs tests missing volumes)",
    signatures: ignore = "the volume's COS credentials come from the catalog; a wrong catalog key is tested in tclake_catalog.rs"
);
