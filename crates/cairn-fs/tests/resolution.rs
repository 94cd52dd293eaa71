//! How a filesystem's options resolve from defaults, the native environment,
//! FSSPEC_ variables and explicit options, and the errors bad input gets.

use cairn_fs::{Environment, ErrorKind, FileSystem, FileSystemBuilder, Source, StorageOptions};

fn build(
    protocol: &str,
    options: serde_json::Value,
    env: &[(&str, &str)],
) -> cairn_fs::Result<FileSystem> {
    FileSystemBuilder::new(protocol)
        .options(StorageOptions::from_json(options).unwrap())
        .env(Environment::from_pairs(env.iter().copied()))
        .build()
}

fn line(fs: &FileSystem, name: &str) -> (String, Source) {
    let l = fs
        .describe()
        .into_iter()
        .find(|l| l.name == name)
        .unwrap_or_else(|| panic!("no {name} in {:?}", fs.describe()));
    (l.value, l.source)
}

#[test]
fn precedence_lowest_first() {
    let env = [
        ("AWS_DEFAULT_REGION", "from-aws"),
        (
            "FSSPEC_S3",
            r#"{"region": "from-fsspec-dict", "endpoint_url": "http://dict:1"}"#,
        ),
        ("FSSPEC_S3_REGION", "from-fsspec-kwarg"),
    ];
    let fs = build("s3", serde_json::json!({}), &env[..1]).unwrap();
    assert_eq!(
        line(&fs, "region"),
        ("from-aws".into(), Source::Env("AWS_DEFAULT_REGION".into()))
    );
    let fs = build("s3", serde_json::json!({}), &env[..2]).unwrap();
    assert_eq!(
        line(&fs, "region"),
        ("from-fsspec-dict".into(), Source::Env("FSSPEC_S3".into()))
    );
    let fs = build("s3", serde_json::json!({}), &env).unwrap();
    assert_eq!(
        line(&fs, "region"),
        (
            "from-fsspec-kwarg".into(),
            Source::Env("FSSPEC_S3_REGION".into())
        )
    );
    assert_eq!(line(&fs, "endpoint_url").0, "http://dict:1");
    let fs = build(
        "s3",
        serde_json::json!({"s3": {"region": "explicit"}}),
        &env,
    )
    .unwrap();
    assert_eq!(
        line(&fs, "region"),
        ("explicit".into(), Source::Option("s3.region".into()))
    );
}

#[test]
fn string_options_keep_the_raw_text_of_their_variable() {
    let env = [
        ("FSSPEC_S3_KEY", "12345"),
        ("FSSPEC_S3_SECRET", "true"),
        ("FSSPEC_S3_REGION", "0123"),
    ];
    let fs = build("s3", serde_json::json!({}), &env).unwrap();
    assert_eq!(line(&fs, "key").0, "12345");
    assert_eq!(line(&fs, "region").0, "0123");
    assert_eq!(
        line(&fs, "secret"),
        ("***".into(), Source::Env("FSSPEC_S3_SECRET".into()))
    );
    // Typed options are still JSON-decoded, as fsspec does.
    let fs = build("s3", serde_json::json!({}), &[("FSSPEC_S3_ANON", "true")]).unwrap();
    assert_eq!(line(&fs, "anon").0, "true");
    let fs = build(
        "s3",
        serde_json::json!({}),
        &[("FSSPEC_S3A_USE_LISTINGS_CACHE", "false")],
    )
    .unwrap();
    assert_eq!(
        line(&fs, "use_listings_cache"),
        (
            "false".into(),
            Source::Env("FSSPEC_S3A_USE_LISTINGS_CACHE".into())
        )
    );
}

#[test]
fn malformed_client_kwargs_variable_is_named() {
    let err = build(
        "s3",
        serde_json::json!({}),
        &[("FSSPEC_S3_CLIENT_KWARGS", "{\"endpoint_url\": ")],
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config);
    assert!(err.to_string().contains("FSSPEC_S3_CLIENT_KWARGS"), "{err}");
}

#[test]
fn non_object_protocol_variable_is_named() {
    let err = build("s3", serde_json::json!({}), &[("FSSPEC_S3", "[1, 2]")]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config);
    assert!(err.to_string().contains("FSSPEC_S3"), "{err}");
    // Another protocol's bad variable does not stop s3.
    build("s3", serde_json::json!({}), &[("FSSPEC_GCS", "[1, 2]")]).unwrap();
}

#[test]
fn unknown_addressing_style_is_named_with_its_origin() {
    let err = build(
        "s3",
        serde_json::json!({}),
        &[(
            "FSSPEC_S3_CONFIG_KWARGS",
            r#"{"s3": {"addressing_style": "sideways"}}"#,
        )],
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("addressing_style")
            && text.contains("FSSPEC_S3_CONFIG_KWARGS")
            && text.contains("sideways"),
        "{text}"
    );
}

#[test]
fn unknown_option_from_the_environment_is_named() {
    let err = build(
        "s3",
        serde_json::json!({}),
        &[("FSSPEC_S3_ENDPONT_URL", "http://x")],
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("FSSPEC_S3_ENDPONT_URL") && text.contains("endpoint_url"),
        "{text}"
    );
}

#[test]
fn cos_without_region_or_endpoint_is_a_clear_error() {
    let err = build("cos", serde_json::json!({}), &[]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config);
    assert!(err.to_string().contains("TENCENTCLOUD_REGION"), "{err}");
    let fs = build(
        "cos",
        serde_json::json!({}),
        &[("TENCENTCLOUD_REGION", "ap-guangzhou")],
    )
    .unwrap();
    assert_eq!(
        line(&fs, "endpoint_url").0,
        "https://cos.ap-guangzhou.myqcloud.com"
    );
    assert_eq!(line(&fs, "addressing_style").0, "virtual");
    assert!(
        fs.describe()
            .iter()
            .any(|l| l.name == "request_hook" && l.value.contains("ContentMd5"))
    );
}

#[test]
fn secrets_never_show_in_reports_or_debug() {
    let env = [
        ("FSSPEC_S3", r#"{"secret": "dict-secret-value"}"#),
        ("AWS_SESSION_TOKEN", "token-value-xyz"),
    ];
    let fs = build("s3", serde_json::json!({"s3": {"key": "AK"}}), &env).unwrap();
    let text = format!("{:?} {:?}", fs.describe(), fs);
    assert!(
        !text.contains("dict-secret-value") && !text.contains("token-value-xyz"),
        "{text}"
    );
}

/// Every keyword argument of s3fs 2026.9's `S3FileSystem` (its signature,
/// read from the s3fs wheel the tools install), with a value of its type.
const S3FS_KEYWORDS: &[(&str, &str)] = &[
    ("anon", "false"),
    ("endpoint_url", "\"http://127.0.0.1:1\""),
    ("key", "\"k\""),
    ("secret", "\"s\""),
    ("token", "\"t\""),
    ("use_ssl", "true"),
    ("client_kwargs", "{}"),
    ("requester_pays", "true"),
    ("default_block_size", "5242880"),
    ("default_fill_cache", "true"),
    ("default_cache_type", "\"readahead\""),
    ("version_aware", "false"),
    ("config_kwargs", "{}"),
    (
        "s3_additional_kwargs",
        "{\"ServerSideEncryption\": \"AES256\"}",
    ),
    ("session", "null"),
    ("cache_regions", "false"),
    ("asynchronous", "false"),
    ("loop", "null"),
    ("max_concurrency", "10"),
    ("fixed_upload_size", "false"),
    ("local_expiry_check", "false"),
    ("skip_instance_cache", "false"),
];

#[test]
fn every_s3fs_keyword_is_recognised_as_an_option_and_as_an_fsspec_variable() {
    for (name, value) in S3FS_KEYWORDS {
        let options = serde_json::json!({ "s3": { *name: serde_json::from_str::<serde_json::Value>(value).unwrap() } });
        let mut options = options;
        if *name == "key" {
            options["s3"]["secret"] = "s".into();
        }
        if *name == "secret" {
            options["s3"]["key"] = "k".into();
        }
        build("s3", options, &[]).unwrap_or_else(|e| panic!("s3.{name}: {e}"));
    }
    // As users of s3fs set them through fsspec's variables.
    build(
        "s3",
        serde_json::json!({}),
        &[("FSSPEC_S3_DEFAULT_BLOCK_SIZE", "5242880")],
    )
    .unwrap();
    build(
        "s3",
        serde_json::json!({}),
        &[("FSSPEC_S3", "{\"requester_pays\": true}")],
    )
    .unwrap();
    // username/password are key/secret; both names at once is ambiguous.
    build(
        "s3",
        serde_json::json!({"s3": {"username": "k", "password": "s"}}),
        &[],
    )
    .unwrap();
    let err = build(
        "s3",
        serde_json::json!({"s3": {"key": "k", "username": "k2", "secret": "s"}}),
        &[],
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("one setting under two names"),
        "{err}"
    );
    // What cairn cannot honour is refused, not ignored.
    let err = build(
        "s3",
        serde_json::json!({"s3": {"version_aware": true}}),
        &[],
    )
    .unwrap_err();
    assert!(err.to_string().contains("version_aware"), "{err}");
    let err = build(
        "s3",
        serde_json::json!({"s3": {"s3_additional_kwargs": {"ACL": "public-read"}}}),
        &[],
    )
    .unwrap_err();
    assert!(err.to_string().contains("ACL"), "{err}");
    // A key no such library knows stays an error.
    let err = build(
        "s3",
        serde_json::json!({"s3": {"defualt_block_size": 1}}),
        &[],
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config);
}

#[test]
fn use_ssl_false_means_http_for_the_regional_endpoint() {
    let fs = build(
        "s3",
        serde_json::json!({"s3": {"use_ssl": false, "region": "eu-west-1"}}),
        &[],
    )
    .unwrap();
    assert_eq!(
        line(&fs, "endpoint_url").0,
        "http://s3.eu-west-1.amazonaws.com"
    );
    let fs = build(
        "s3",
        serde_json::json!({"s3": {"requester_pays": true,
            "s3_additional_kwargs": {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": "alias/k"}}}),
        &[],
    )
    .unwrap();
    assert_eq!(line(&fs, "requester_pays").0, "true");
    let sse = fs
        .describe()
        .into_iter()
        .find(|l| l.name == "server_side_encryption")
        .unwrap();
    assert_eq!(
        (sse.value.as_str(), sse.note.as_deref()),
        ("aws:kms", Some("KMS key alias/k")),
        "a value is the value; the key is a note"
    );
}

/// Every keyword argument of gcsfs 2026.10's `GCSFileSystem` (its signature,
/// read from the gcsfs wheel), with a value of its type.
const GCSFS_KEYWORDS: &[(&str, &str)] = &[
    ("project", "\"p\""),
    ("access", "\"read_only\""),
    ("token", "\"anon\""),
    ("block_size", "5242880"),
    ("consistency", "\"md5\""),
    ("cache_timeout", "10"),
    ("secure_serialize", "true"),
    ("check_connection", "false"),
    ("requests_timeout", "30"),
    ("requester_pays", "false"),
    ("asynchronous", "false"),
    ("session_kwargs", "{}"),
    ("loop", "null"),
    ("timeout", "30"),
    ("endpoint_url", "\"http://127.0.0.1:1\""),
    ("default_location", "\"US\""),
    ("version_aware", "false"),
    ("skip_instance_cache", "false"),
];

/// Every keyword argument of ossfs 2025.5's `OSSFileSystem`.
const OSSFS_KEYWORDS: &[(&str, &str)] = &[
    ("endpoint", "\"http://127.0.0.1:1\""),
    ("key", "\"k\""),
    ("secret", "\"s\""),
    ("token", "\"t\""),
    ("default_cache_type", "\"readahead\""),
    ("default_block_size", "5242880"),
    ("psize", "1"),
    ("skip_instance_cache", "false"),
    ("asynchronous", "false"),
    ("loop", "null"),
];

#[test]
fn every_gcsfs_and_ossfs_keyword_is_recognised() {
    for (protocol, keywords) in [("gcs", GCSFS_KEYWORDS), ("oss", OSSFS_KEYWORDS)] {
        for (name, value) in keywords {
            let value: serde_json::Value = serde_json::from_str(value).unwrap();
            let mut options = serde_json::json!({ protocol: { *name: value } });
            if protocol == "oss" {
                // The options every OSS filesystem needs, beside the one tried.
                for (needed, v) in [
                    ("endpoint", "http://127.0.0.1:1"),
                    ("key", "k"),
                    ("secret", "s"),
                ] {
                    if options[protocol].get(needed).is_none() {
                        options[protocol][needed] = v.into();
                    }
                }
            }
            build(protocol, options, &[]).unwrap_or_else(|e| panic!("{protocol}.{name}: {e}"));
        }
    }
    // As fsspec's variables set them.
    build(
        "gcs",
        serde_json::json!({}),
        &[("FSSPEC_GCS_BLOCK_SIZE", "5242880")],
    )
    .unwrap();
    build(
        "oss",
        serde_json::json!({"oss": {"endpoint": "http://127.0.0.1:1"}}),
        &[("FSSPEC_OSS_DEFAULT_CACHE_TYPE", "none")],
    )
    .unwrap();
    // gcsfs's access level is the OAuth scope.
    let fs = build(
        "gcs",
        serde_json::json!({"gcs": {"access": "read_write"}}),
        &[],
    )
    .unwrap();
    assert!(format!("{fs:?}").contains("read_write"), "{fs:?}");
    // What cairn cannot honour is refused, naming the option.
    for (name, value) in [
        ("requester_pays", serde_json::json!(true)),
        ("version_aware", serde_json::json!(true)),
        ("token", serde_json::json!("browser")),
        ("access", serde_json::json!("everything")),
    ] {
        let err = build("gcs", serde_json::json!({ "gcs": { name: value } }), &[]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Config, "{name}: {err}");
        assert!(err.to_string().contains(name), "{name}: {err}");
    }
    // A key no such library knows stays an error.
    let err = build("gcs", serde_json::json!({"gcs": {"blok_size": 1}}), &[]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config);
}

#[test]
fn keywords_without_effect_are_shown_with_their_source() {
    let fs = build(
        "s3",
        serde_json::json!({"s3": {"skip_instance_cache": true}}),
        &[("FSSPEC_S3_DEFAULT_BLOCK_SIZE", "5242880")],
    )
    .unwrap();
    // A value is the value; that it does nothing is a note of its own.
    let noted = |fs: &FileSystem, name: &str| {
        let l = fs.describe().into_iter().find(|l| l.name == name).unwrap();
        (l.value, l.source, l.note.unwrap_or_default())
    };
    let (value, source, note) = noted(&fs, "default_block_size");
    assert_eq!(value, "5242880");
    assert!(note.contains("no effect"), "{note}");
    assert_eq!(source, Source::Env("FSSPEC_S3_DEFAULT_BLOCK_SIZE".into()));
    let (value, source, note) = noted(&fs, "skip_instance_cache");
    assert_eq!(value, "true");
    assert!(note.contains("no effect"), "{note}");
    assert_eq!(source, Source::Option("s3.skip_instance_cache".into()));
    // gcsfs's keywords, the same way.
    let fs = build(
        "gcs",
        serde_json::json!({"gcs": {"block_size": 1024, "token": "anon"}}),
        &[],
    )
    .unwrap();
    let (value, _, note) = noted(&fs, "block_size");
    assert_eq!(value, "1024");
    assert!(note.contains("no effect"), "{note}");
}

#[test]
fn a_json_null_is_an_unset_option_as_fsspec_hands_none() {
    // s3fs's keywords left at their default come as None: unset, not an
    // error ("must be true or false") and not false.
    let fs = build(
        "s3",
        serde_json::json!({"s3": {"anon": null, "use_ssl": null, "requester_pays": null,
                                  "endpoint_url": null, "region": "eu-west-1"}}),
        &[],
    )
    .unwrap();
    // Reported unset, with where the null came from (fsspec hands s3fs
    // None, not False); the value is the default that applies.
    let unset = |fs: &FileSystem, name: &str| {
        let l = fs.describe().into_iter().find(|l| l.name == name).unwrap();
        (l.value, l.source, l.unset)
    };
    assert_eq!(
        unset(&fs, "anon"),
        ("false".into(), Source::Option("s3.anon".into()), true)
    );
    assert_eq!(
        unset(&fs, "requester_pays"),
        (
            "false".into(),
            Source::Option("s3.requester_pays".into()),
            true
        )
    );
    assert!(!unset(&fs, "region").2, "a value given is not unset");
    // And from fsspec's variables.
    let fs = build(
        "s3",
        serde_json::json!({}),
        &[
            ("FSSPEC_S3_ANON", "null"),
            ("FSSPEC_S3_REQUESTER_PAYS", "null"),
        ],
    )
    .unwrap();
    assert_eq!(
        unset(&fs, "requester_pays"),
        (
            "false".into(),
            Source::Env("FSSPEC_S3_REQUESTER_PAYS".into()),
            true
        )
    );
    assert_eq!(
        unset(&fs, "anon"),
        ("false".into(), Source::Env("FSSPEC_S3_ANON".into()), true)
    );
    let fs = build(
        "gcs",
        serde_json::json!({"gcs": {"anon": null, "token": "anon"}}),
        &[],
    );
    assert!(fs.is_ok(), "{:?}", fs.err());
}
