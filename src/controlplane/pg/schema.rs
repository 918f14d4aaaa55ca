//! Versioned migrations of the PostgreSQL schema.

use super::super::store::StoreError;

pub async fn migrate(_client: &mut deadpool_postgres::Object) -> Result<(), StoreError> {
    Err(StoreError::Pool(
        "the PostgreSQL schema is not written yet".into(),
    ))
}
