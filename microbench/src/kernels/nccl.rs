//! What a job's ranks need of the loaded NCCL before any of them joins (issue 12): rank 0's
//! unique id, which the rendezvous hands every rank, and the version the records carry.

use super::collective::nccl_version as loaded_nccl;
use super::loader::{check_libraries, Library};
use crate::error::{Error, Result};
use cudarc::nccl::result as nccl;

/// NCCL's unique id, made by rank 0 and handed to every rank: its 128 bytes. Making it loads
/// NCCL and starts NCCL's bootstrap root in this process, which must live until every rank
/// has initialised.
pub fn nccl_unique_id() -> Result<Vec<u8>> {
    check_libraries(&[Library::Nccl])?;
    let id = nccl::get_uniqueid().map_err(|e| Error::Cuda {
        call: "ncclGetUniqueId",
        gpu: 0,
        message: format!("{:?}", e.0),
    })?;
    Ok(id.internal.iter().map(|&c| c as u8).collect())
}

/// The loaded NCCL's version, `2.27.3`, for the records; `None` when it does not load.
pub fn nccl_version() -> Option<String> {
    check_libraries(&[Library::Nccl]).ok()?;
    loaded_nccl()
}
