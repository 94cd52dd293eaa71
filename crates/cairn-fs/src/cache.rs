//! The listing cache, with fsspec's knobs and semantics (`DirCache`):
//! directory listings are kept and answer `ls`, `info` and `exists` without a
//! request; the filesystem's own writes drop the written path and every
//! ancestor; `listings_expiry_time` bounds an entry's age and `max_paths` the
//! number of directories kept (least recently used go first).
//!
//! Another process's writes are not seen until an entry expires or is
//! invalidated, which is why checkpoint filesystems never cache.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::entry::FileInfo;
use crate::error::Result;
use crate::options::{BackendOptions, ConfigLine, Setting, Source, value_as_bool, value_as_f64};

/// Listing-cache settings.
///
/// ```
/// let c = cairn_fs::ListingCacheConfig::disabled();
/// assert!(!c.enabled.value);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ListingCacheConfig {
    /// `use_listings_cache`.
    pub enabled: Setting<bool>,
    /// `listings_expiry_time`: entries older than this are not used.
    pub expiry: Option<Setting<Duration>>,
    /// `max_paths`: at most this many directories are kept.
    pub max_paths: Option<Setting<usize>>,
}

impl ListingCacheConfig {
    /// The cache turned off.
    ///
    /// ```
    /// assert!(cairn_fs::ListingCacheConfig::disabled().expiry.is_none());
    /// ```
    pub fn disabled() -> Self {
        Self {
            enabled: Setting::new(false, Source::Default),
            expiry: None,
            max_paths: None,
        }
    }

    /// Takes the cache options out of a backend's options.
    pub(crate) fn take_from(options: &mut BackendOptions, default_on: bool) -> Result<Self> {
        let mut config = Self {
            enabled: Setting::new(default_on, Source::Default),
            expiry: None,
            max_paths: None,
        };
        if let Some((value, source)) = options.take("use_listings_cache") {
            let at = options.at("use_listings_cache", &source);
            config.enabled = at.setting(value_as_bool(&value, &at.label())?);
        }
        if let Some((value, source)) = options.take("listings_expiry_time") {
            let at = options.at("listings_expiry_time", &source);
            if !value.is_null() {
                let secs = value_as_f64(&value, &at.label())?;
                config.expiry = Some(at.setting(Duration::from_secs_f64(secs)));
            }
        }
        if let Some((value, source)) = options.take("max_paths") {
            let at = options.at("max_paths", &source);
            if !value.is_null() {
                let n = value_as_f64(&value, &at.label())? as usize;
                config.max_paths = Some(at.setting(n.max(1)));
            }
        }
        Ok(config)
    }

    /// Report lines for `cairn config`.
    pub(crate) fn describe(&self) -> Vec<ConfigLine> {
        let mut out = vec![ConfigLine {
            name: "use_listings_cache".into(),
            value: self.enabled.value.to_string(),
            source: self.enabled.source.clone(),
            note: None,
            unset: false,
        }];
        if let Some(e) = &self.expiry {
            out.push(ConfigLine {
                name: "listings_expiry_time".into(),
                value: format!("{}", e.value.as_secs_f64()),
                source: e.source.clone(),
                note: None,
                unset: false,
            });
        }
        if let Some(m) = &self.max_paths {
            out.push(ConfigLine {
                name: "max_paths".into(),
                value: m.value.to_string(),
                source: m.source.clone(),
                note: None,
                unset: false,
            });
        }
        out
    }
}

struct Entry {
    listed_at: Instant,
    last_used: u64,
    listing: Vec<FileInfo>,
}

/// Cached directory listings, keyed by the directory's stripped path.
pub(crate) struct DirCache {
    config: ListingCacheConfig,
    entries: Mutex<(HashMap<String, Entry>, u64)>,
}

impl DirCache {
    pub fn new(config: ListingCacheConfig) -> Self {
        Self {
            config,
            entries: Mutex::new((HashMap::new(), 0)),
        }
    }

    pub fn config(&self) -> &ListingCacheConfig {
        &self.config
    }

    fn fresh(&self, entry: &Entry) -> bool {
        self.config
            .expiry
            .as_ref()
            .is_none_or(|e| entry.listed_at.elapsed() < e.value)
    }

    /// The cached listing of directory `dir`, if any and fresh.
    pub fn get(&self, dir: &str) -> Option<Vec<FileInfo>> {
        if !self.config.enabled.value {
            return None;
        }
        let mut guard = self.entries.lock().expect("listing cache poisoned");
        let (map, clock) = &mut *guard;
        *clock += 1;
        let now = *clock;
        let fresh = map.get(dir).map(|e| self.fresh(e))?;
        if !fresh {
            map.remove(dir);
            return None;
        }
        let entry = map.get_mut(dir)?;
        entry.last_used = now;
        Some(entry.listing.clone())
    }

    /// Stores the listing of directory `dir`.
    pub fn put(&self, dir: &str, listing: Vec<FileInfo>) {
        if !self.config.enabled.value {
            return;
        }
        let mut guard = self.entries.lock().expect("listing cache poisoned");
        let (map, clock) = &mut *guard;
        *clock += 1;
        map.insert(
            dir.to_string(),
            Entry {
                listed_at: Instant::now(),
                last_used: *clock,
                listing,
            },
        );
        if let Some(max) = &self.config.max_paths {
            while map.len() > max.value {
                let oldest = map
                    .iter()
                    .min_by_key(|(_, e)| e.last_used)
                    .map(|(k, _)| k.clone())
                    .expect("map is not empty");
                map.remove(&oldest);
            }
        }
    }

    /// Drops `path` and every ancestor directory (fsspec's `invalidate_cache`).
    pub fn invalidate(&self, path: &str) {
        if !self.config.enabled.value {
            return;
        }
        let mut guard = self.entries.lock().expect("listing cache poisoned");
        let map = &mut guard.0;
        let mut current = path.trim_end_matches('/');
        loop {
            map.remove(current);
            match current.rfind('/') {
                Some(0) if current.len() > 1 => current = "/",
                Some(idx) if idx > 0 => current = &current[..idx],
                _ => break,
            }
        }
    }

    /// Drops everything.
    pub fn clear(&self) {
        self.entries
            .lock()
            .expect("listing cache poisoned")
            .0
            .clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(expiry: Option<f64>, max: Option<usize>) -> DirCache {
        DirCache::new(ListingCacheConfig {
            enabled: Setting::new(true, Source::Default),
            expiry: expiry.map(|s| Setting::new(Duration::from_secs_f64(s), Source::Default)),
            max_paths: max.map(|m| Setting::new(m, Source::Default)),
        })
    }

    #[test]
    fn invalidation_drops_path_and_ancestors_only() {
        let c = cache(None, None);
        for dir in ["b", "b/x", "b/x/y", "b/z"] {
            c.put(dir, vec![]);
        }
        c.invalidate("b/x/y/file");
        assert!(c.get("b/x/y").is_none() && c.get("b/x").is_none() && c.get("b").is_none());
        assert!(c.get("b/z").is_some());
        c.put("/", vec![]);
        c.put("/a", vec![]);
        c.invalidate("/a/f");
        assert!(c.get("/").is_none() && c.get("/a").is_none());
    }

    #[test]
    fn expiry_and_lru_bound() {
        let c = cache(Some(0.05), Some(2));
        c.put("a", vec![]);
        c.put("b", vec![]);
        assert!(c.get("a").is_some());
        c.put("c", vec![]);
        assert!(c.get("b").is_none(), "least recently used goes first");
        assert!(c.get("a").is_some() && c.get("c").is_some());
        std::thread::sleep(Duration::from_millis(80));
        assert!(c.get("a").is_none(), "expired");
    }

    #[test]
    fn disabled_cache_stores_nothing() {
        let c = DirCache::new(ListingCacheConfig::disabled());
        c.put("a", vec![]);
        assert!(c.get("a").is_none());
    }
}
