//! Named options of the operations that walk or transfer many paths, in
//! OpenDAL's `*_with` habit: `fs.find(path)` takes the defaults,
//! `fs.find_with(path, FindOptions::new().max_depth(2).with_dirs(true))`
//! says what it changes. The fields keep fsspec's meanings.

/// Options of [`FileSystem::find_with`](crate::FileSystem::find_with) and
/// [`find_stream`](crate::FileSystem::find_stream),
/// [`du_with`](crate::FileSystem::du_with), and of
/// [`glob_with`](crate::FileSystem::glob_with),
/// [`glob_stream`](crate::FileSystem::glob_stream) and
/// [`walk`](crate::FileSystem::walk) (which read `max_depth` only).
///
/// ```
/// let options = cairn_fs::FindOptions::new().max_depth(2).with_dirs(true);
/// assert_eq!((options.max_depth, options.with_dirs), (Some(2), true));
/// assert_eq!(cairn_fs::FindOptions::default().max_depth, None);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FindOptions {
    /// Levels below the path to descend (fsspec's `maxdepth`; `None`: all).
    pub max_depth: Option<usize>,
    /// Include directories as entries (fsspec's `withdirs`).
    pub with_dirs: bool,
}

impl FindOptions {
    /// Every level, files only.
    ///
    /// ```
    /// assert!(!cairn_fs::FindOptions::new().with_dirs);
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Descend at most `depth` levels (at least 1).
    ///
    /// ```
    /// assert_eq!(cairn_fs::FindOptions::new().max_depth(1).max_depth, Some(1));
    /// ```
    pub fn max_depth(mut self, depth: usize) -> Self {
        self.max_depth = Some(depth);
        self
    }

    /// Descend at most `depth` levels when given; every level otherwise.
    ///
    /// ```
    /// assert_eq!(cairn_fs::FindOptions::new().max_depth_opt(None).max_depth, None);
    /// ```
    pub fn max_depth_opt(mut self, depth: Option<usize>) -> Self {
        self.max_depth = depth;
        self
    }

    /// Include directories.
    ///
    /// ```
    /// assert!(cairn_fs::FindOptions::new().with_dirs(true).with_dirs);
    /// ```
    pub fn with_dirs(mut self, with_dirs: bool) -> Self {
        self.with_dirs = with_dirs;
        self
    }
}

/// Options of [`FileSystem::rm_with`](crate::FileSystem::rm_with) and of the
/// transfers ([`cp_with`](crate::FileSystem::cp_with),
/// [`mv_with`](crate::FileSystem::mv_with), [`put_with`](crate::FileSystem::put_with),
/// [`get_with`](crate::FileSystem::get_with)).
///
/// ```
/// let options = cairn_fs::TreeOptions::new().recursive(true);
/// assert!(options.recursive && options.max_depth.is_none());
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TreeOptions {
    /// Apply to directories and everything under them (fsspec's `recursive`).
    pub recursive: bool,
    /// With `recursive`, levels below each path (fsspec's `maxdepth`; the
    /// `*_list` forms, like fsspec's, copy a list to full depth).
    pub max_depth: Option<usize>,
}

impl TreeOptions {
    /// Files only, not recursive.
    ///
    /// ```
    /// assert!(!cairn_fs::TreeOptions::new().recursive);
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Recurse into directories.
    ///
    /// ```
    /// assert!(cairn_fs::TreeOptions::new().recursive(true).recursive);
    /// ```
    pub fn recursive(mut self, recursive: bool) -> Self {
        self.recursive = recursive;
        self
    }

    /// Recurse at most `depth` levels.
    ///
    /// ```
    /// assert_eq!(cairn_fs::TreeOptions::new().max_depth(3).max_depth, Some(3));
    /// ```
    pub fn max_depth(mut self, depth: usize) -> Self {
        self.max_depth = Some(depth);
        self
    }

    /// Recurse at most `depth` levels when given; every level otherwise.
    ///
    /// ```
    /// assert_eq!(cairn_fs::TreeOptions::new().max_depth_opt(Some(2)).max_depth, Some(2));
    /// ```
    pub fn max_depth_opt(mut self, depth: Option<usize>) -> Self {
        self.max_depth = depth;
        self
    }
}
