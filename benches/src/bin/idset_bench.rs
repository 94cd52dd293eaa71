//! ID-set build time, peak memory and membership throughput; and the load
//! path: committed ID files read from a checkpoint directory into a set.
//!
//! Usage:
//!   idset_bench random-u64|sequential-i64|strings-32 COUNT
//!   idset_bench write-files random-u64|sequential-i64|strings-32 COUNT DIR
//!   idset_bench load-files random-u64|sequential-i64|strings-32 COUNT DIR
//!   idset_bench floor COUNT DIR
//! Run one case per process (scripts/bench/idset_bench.sh does) so the peak
//! resident set (VmHWM) belongs to that case alone. In the first form IDs
//! arrive as Arrow arrays of 1M rows and each is dropped once added. The file
//! forms write COUNT IDs as committed ID files of 100,000 IDs (the default
//! commit interval) under DIR, then time `load_committed` over them.
//! `floor` times what a load of COUNT random IDs cannot go below on this
//! machine, with nothing of cairn's: a plain least-significant-digit radix
//! sort of the same keys (one thread and two), and reading and decoding the
//! ID files of a local DIR with the parquet crate (two threads).

use std::sync::Arc;
use std::time::Instant;

use arrow_array::{ArrayRef, Int64Array, StringArray, UInt64Array};
use cairn_checkpoint::internals::{RunId, encode_ids, load_committed};
use cairn_checkpoint::{IdSetBuilder, StringMode, UnitName};
use cairn_fs::{StorageOptions, WriteMode, build_checkpoint_filesystem};
use futures::{StreamExt, stream};

/// IDs per committed ID file in the file forms.
const FILE_IDS: u64 = 100_000;

const CHUNK: u64 = 1_000_000;

/// splitmix64, so runs are repeatable.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E3779B97F4A7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
    z ^ (z >> 31)
}

fn string_id(i: u64) -> String {
    format!("{:016x}{:016x}", mix(i), mix(i ^ 0xABCDEF))
}

/// The IDs of file `file` of a `kind` checkpoint.
fn file_ids(kind: &str, file: u64, count: u64) -> ArrayRef {
    let ids = file * FILE_IDS..((file + 1) * FILE_IDS).min(count);
    match kind {
        "random-u64" => Arc::new(UInt64Array::from_iter_values(ids.map(mix))),
        "sequential-i64" => Arc::new(Int64Array::from_iter_values(ids.map(|i| i as i64))),
        "strings-32" => Arc::new(StringArray::from_iter_values(ids.map(string_id))),
        other => panic!("unknown kind {other}"),
    }
}

/// `write-files` and `load-files`.
#[tokio::main]
async fn files(step: &str, kind: &str, count: u64, dir: &str) {
    let (fs, _) = build_checkpoint_filesystem(dir, &StorageOptions::new()).unwrap();
    let files = count.div_ceil(FILE_IDS);
    if step == "write-files" {
        let run = RunId::new();
        stream::iter(0..files)
            .for_each_concurrent(8, |file| {
                let (fs, run) = (fs.clone(), run.clone());
                async move {
                    let bytes = tokio::task::spawn_blocking({
                        let kind = kind.to_string();
                        move || encode_ids("id", file_ids(&kind, file, count)).unwrap()
                    })
                    .await
                    .unwrap();
                    let name = UnitName::new(&run, file).committed_file();
                    fs.pipe(&format!("{dir}/{name}"), bytes, WriteMode::Overwrite)
                        .await
                        .unwrap();
                }
            })
            .await;
        return;
    }
    let baseline = cairn_bench::peak_rss_mib();
    let started = Instant::now();
    let state = load_committed(&fs, dir, "id", StringMode::default())
        .await
        .unwrap();
    let load_seconds = started.elapsed().as_secs_f64();
    assert_eq!(state.ids.len(), count);
    println!(
        "{}",
        serde_json::json!({
            "kind": kind, "ids": count, "files": files, "load_seconds": load_seconds,
            "peak_rss_mib": cairn_bench::peak_rss_mib(), "baseline_rss_mib": baseline,
            "set_mib": state.ids.memory_bytes() as f64 / 1048576.0,
        })
    );
}

/// `floor`: the bare read of DIR's ID files, then the plain radix sorts of
/// COUNT random keys.
fn floor(count: u64, dir: &str) {
    // The read first, while the files are in the page cache from the
    // write or load before it: the sorts' 16 bytes a key may evict them.
    let started = Instant::now();
    let (files, ids) = read_id_files(dir, 2);
    let read_seconds = started.elapsed().as_secs_f64();
    assert_eq!(ids, count, "{dir} holds {count} IDs");
    let mut keys: Vec<u64> = Vec::new();
    let mut scratch: Vec<u64> = vec![0; count as usize];
    let mut sorts = serde_json::Map::new();
    for (threads, digit_bits) in [(1, 8), (1, 11), (2, 11)] {
        keys.clear();
        keys.extend((0..count).map(mix));
        let started = Instant::now();
        lsd_radix_sort(&mut keys, &mut scratch, digit_bits, threads);
        let seconds = started.elapsed().as_secs_f64();
        assert!(keys.is_sorted());
        sorts.insert(
            format!("sort_{threads}t_{digit_bits}bit_seconds"),
            seconds.into(),
        );
    }
    drop((keys, scratch));
    let mut report =
        serde_json::json!({"ids": count, "files": files, "read_seconds": read_seconds});
    report.as_object_mut().unwrap().extend(sorts);
    println!("{report}");
}

/// A textbook least-significant-digit radix sort of `keys` by digits of
/// `digit_bits`, on `threads` threads (each counts and scatters its own
/// stretch of the keys); `scratch` is as long as `keys`.
fn lsd_radix_sort(keys: &mut [u64], scratch: &mut [u64], digit_bits: u32, threads: usize) {
    /// A pointer shared by threads that write disjoint slots.
    #[derive(Clone, Copy)]
    struct Slots(*mut u64);
    // SAFETY: each thread writes only the slots its own offsets give it.
    unsafe impl Send for Slots {}
    unsafe impl Sync for Slots {}
    let buckets = 1usize << digit_bits;
    let mask = (buckets - 1) as u64;
    let stretch = keys.len().div_ceil(threads);
    let (mut src, mut dst) = (keys, scratch);
    let mut shift = 0;
    let mut swapped = false;
    while shift < 64 {
        let digit = |k: u64| ((k >> shift) & mask) as usize;
        let counts: Vec<Vec<usize>> = std::thread::scope(|scope| {
            let counters: Vec<_> = src
                .chunks(stretch)
                .map(|part| {
                    scope.spawn(move || {
                        let mut counts = vec![0usize; buckets];
                        for &k in part {
                            counts[digit(k)] += 1;
                        }
                        counts
                    })
                })
                .collect();
            counters.into_iter().map(|c| c.join().unwrap()).collect()
        });
        // Thread t's keys of digit d go after every digit below d and
        // after the keys of digit d of threads before t.
        let mut offsets = vec![vec![0usize; buckets]; counts.len()];
        let mut at = 0;
        for d in 0..buckets {
            for t in 0..counts.len() {
                offsets[t][d] = at;
                at += counts[t][d];
            }
        }
        let slots = Slots(dst.as_mut_ptr());
        std::thread::scope(|scope| {
            for (part, mut next) in src.chunks(stretch).zip(offsets) {
                scope.spawn(move || {
                    let slots = slots;
                    for &k in part {
                        let d = digit(k);
                        // SAFETY: offsets partition 0..len among threads
                        // and digits, so no slot is written twice.
                        unsafe { slots.0.add(next[d]).write(k) };
                        next[d] += 1;
                    }
                });
            }
        });
        std::mem::swap(&mut src, &mut dst);
        swapped = !swapped;
        shift += digit_bits;
    }
    if swapped {
        dst.copy_from_slice(src);
    }
}

/// Reads every ID file under local `dir` with the parquet crate on
/// `threads` threads: (files, IDs read).
fn read_id_files(dir: &str, threads: usize) -> (usize, u64) {
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let paths: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let ids: u64 = std::thread::scope(|scope| {
        let readers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut ids = 0u64;
                    let mut checksum = 0u64;
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(path) = paths.get(i) else { break };
                        let file = std::fs::File::open(path).unwrap();
                        let reader = ParquetRecordBatchReaderBuilder::try_new(file)
                            .unwrap()
                            .build()
                            .unwrap();
                        for batch in reader {
                            let batch = batch.unwrap();
                            let column = batch.column(0);
                            let values = column.as_any().downcast_ref::<UInt64Array>().unwrap();
                            checksum ^= values.values().iter().fold(0, |a, &v| a ^ v);
                            ids += values.len() as u64;
                        }
                    }
                    std::hint::black_box(checksum);
                    ids
                })
            })
            .collect();
        readers.into_iter().map(|r| r.join().unwrap()).sum()
    });
    (paths.len(), ids)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let kind = args
        .next()
        .expect("kind: random-u64 | sequential-i64 | strings-32 | write-files | load-files");
    if kind == "floor" {
        let count = args
            .next()
            .expect("count")
            .parse()
            .expect("count is a number");
        floor(count, &args.next().expect("directory of ID files"));
        return;
    }
    if kind == "write-files" || kind == "load-files" {
        let ids = args.next().expect("kind of IDs");
        let count: u64 = args
            .next()
            .expect("count")
            .parse()
            .expect("count is a number");
        let dir = args.next().expect("checkpoint directory");
        files(&kind, &ids, count, &dir);
        return;
    }
    let count: u64 = args
        .next()
        .expect("count")
        .parse()
        .expect("count is a number");
    let baseline = cairn_bench::peak_rss_mib();

    let started = Instant::now();
    let mut builder = IdSetBuilder::new(StringMode::Fingerprint);
    let mut first = 0;
    while first < count {
        let n = CHUNK.min(count - first);
        match kind.as_str() {
            "random-u64" => builder
                .push_array(&UInt64Array::from_iter_values((first..first + n).map(mix)))
                .unwrap(),
            "sequential-i64" => builder
                .push_array(&Int64Array::from_iter_values(
                    (first..first + n).map(|i| i as i64),
                ))
                .unwrap(),
            "strings-32" => builder
                .push_array(&StringArray::from_iter_values(
                    (first..first + n).map(string_id),
                ))
                .unwrap(),
            other => panic!("unknown kind {other}"),
        }
        first += n;
    }
    let set = builder.build();
    let build_seconds = started.elapsed().as_secs_f64();
    assert_eq!(set.len(), count);

    // Membership: 4M probes, half committed, half not.
    let probes = 4_000_000u64.min(count * 2);
    let started = Instant::now();
    let hits = match kind.as_str() {
        "random-u64" => {
            let a = UInt64Array::from_iter_values((0..probes).map(|i| {
                if i % 2 == 0 {
                    mix(i / 2 % count)
                } else {
                    mix(count + i)
                }
            }));
            set.contains_array(&a).unwrap().true_count()
        }
        "sequential-i64" => {
            let a = Int64Array::from_iter_values((0..probes).map(|i| {
                if i % 2 == 0 {
                    (i / 2 % count) as i64
                } else {
                    (count + i) as i64
                }
            }));
            set.contains_array(&a).unwrap().true_count()
        }
        _ => {
            let a = StringArray::from_iter_values((0..probes).map(|i| {
                if i % 2 == 0 {
                    string_id(i / 2 % count)
                } else {
                    string_id(count + i)
                }
            }));
            set.contains_array(&a).unwrap().true_count()
        }
    };
    let probe_seconds = started.elapsed().as_secs_f64();
    assert_eq!(hits as u64, probes / 2);

    println!(
        "{}",
        serde_json::json!({
            "kind": kind, "ids": count, "build_seconds": build_seconds,
            "peak_rss_mib": cairn_bench::peak_rss_mib(), "baseline_rss_mib": baseline,
            "set_mib": set.memory_bytes() as f64 / 1048576.0,
            "set_bytes_per_id": set.memory_bytes() as f64 / count as f64,
            "membership_per_s": probes as f64 / probe_seconds,
        })
    );
}
