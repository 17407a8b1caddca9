//! GEP-31 vocabulary: label/annotation/condition keys, CRD types, the OperatingSystemConfig, validation, classification and the in-place pool hash.
