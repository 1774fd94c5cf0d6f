// Access tokens (secrets stored only as sha256) and the project of an id, for scope checks.

use crate::store::TokenRow;

impl Backend {
    pub(crate) async fn do_create_token(&self, name: String, role: String, project: Option<String>, hash: String) -> Result<TokenRow> {
        let id = uuid::Uuid::now_v7().to_string();
        let now = crate::store::rows::us(&prost_types::Timestamp::from(std::time::SystemTime::now()));
        let exists: Option<(String,)> = sqlx::query_as("SELECT id FROM tokens WHERE name = $1").bind(&name).fetch_optional(&self.pool).await?;
        if exists.is_some() {
            return Err(Error::AlreadyExists(format!("a token named {name:?} already exists (names stay taken after revocation, for the audit trail); pick another name")));
        }
        let mut write = plain_write(self).await?;
        sqlx::query("INSERT INTO tokens (id, name, role, project, secret_hash, created_us) VALUES ($1, $2, $3, $4, $5, $6)")
            .bind(&id)
            .bind(&name)
            .bind(&role)
            .bind(&project)
            .bind(&hash)
            .bind(now)
            .execute(&mut *write)
            .await?;
        write.commit().await?;
        Ok(TokenRow { id, name, role, project, created_us: now, last_used_us: None, revoked_us: None })
    }

    pub(crate) async fn do_list_tokens(&self) -> Result<Vec<TokenRow>> {
        Ok(sqlx::query_as(
            "SELECT id, name, role, project, created_us, last_used_us, revoked_us FROM tokens ORDER BY created_us",
        )
        .fetch_all(&self.pool)
        .await?)
    }

    pub(crate) async fn do_revoke_token(&self, name: String) -> Result<bool> {
        let now = crate::store::rows::us(&prost_types::Timestamp::from(std::time::SystemTime::now()));
        let mut write = plain_write(self).await?;
        let done = sqlx::query("UPDATE tokens SET revoked_us = $2 WHERE name = $1 AND revoked_us IS NULL")
            .bind(&name)
            .bind(now)
            .execute(&mut *write)
            .await?;
        write.commit().await?;
        Ok(done.rows_affected() > 0)
    }

    pub(crate) async fn do_token_by_hash(&self, hash: String) -> Result<Option<TokenRow>> {
        Ok(sqlx::query_as(
            "SELECT id, name, role, project, created_us, last_used_us, revoked_us FROM tokens WHERE secret_hash = $1",
        )
        .bind(&hash)
        .fetch_optional(&self.pool)
        .await?)
    }

    pub(crate) async fn do_any_tokens(&self) -> Result<bool> {
        let row: Option<(String,)> = sqlx::query_as("SELECT id FROM tokens LIMIT 1").fetch_optional(&self.pool).await?;
        Ok(row.is_some())
    }

    pub(crate) async fn do_touch_token(&self, id: String, now_us: i64) -> Result<()> {
        let mut write = plain_write(self).await?;
        sqlx::query("UPDATE tokens SET last_used_us = $2 WHERE id = $1").bind(&id).bind(now_us).execute(&mut *write).await?;
        write.commit().await?;
        Ok(())
    }

    pub(crate) async fn do_existing_projects(&self, keys: Vec<String>) -> Result<Vec<String>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let mut sql = sqlx::QueryBuilder::<Db>::new("SELECT key FROM projects WHERE key IN (");
        let mut list = sql.separated(", ");
        for key in keys {
            list.push_bind(key);
        }
        sql.push(")");
        let rows: Vec<(String,)> = sql.build_query_as().fetch_all(&self.pool).await?;
        Ok(rows.into_iter().map(|(k,)| k).collect())
    }

    pub(crate) async fn do_project_of(&self, kind: crate::store::Entity, id: String) -> Result<Option<String>> {
        let sql = match kind {
            crate::store::Entity::Session => "SELECT project FROM sessions WHERE id = $1",
            crate::store::Entity::Checkpoint => "SELECT project FROM checkpoints WHERE id = $1",
        };
        let row: Option<(String,)> = sqlx::query_as(sql).bind(&id).fetch_optional(&self.pool).await?;
        Ok(row.map(|(p,)| p))
    }
}

impl Backend {
    /// Counts for one project (`None` when it does not exist).
    pub(crate) async fn do_project_stats(&self, project: String) -> Result<Option<baton_proto::v1::ProjectStats>> {
        let mut conn = self.pool.acquire().await?;
        let head: Option<(i64, i64)> =
            sqlx::query_as("SELECT head_revision, events_from FROM projects WHERE key = $1").bind(&project).fetch_optional(&mut *conn).await?;
        let Some((head_revision, events_from)) = head else { return Ok(None) };
        let statuses: Vec<(i32, i64)> =
            sqlx::query_as("SELECT status, COUNT(*) FROM sessions WHERE project = $1 GROUP BY status").bind(&project).fetch_all(&mut *conn).await?;
        let sum = |table: &str| format!("SELECT COUNT(*), CAST(COALESCE(SUM(size_bytes), 0) AS BIGINT) FROM {table} WHERE project = $1");
        let (checkpoints, checkpoint_bytes): (i64, i64) =
            sqlx::query_as(sqlx::AssertSqlSafe(sum("checkpoints"))).bind(&project).fetch_one(&mut *conn).await?;
        let (chunks, chunk_bytes): (i64, i64) = sqlx::query_as(sqlx::AssertSqlSafe(sum("chunks"))).bind(&project).fetch_one(&mut *conn).await?;
        let (memory_entries,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM memory WHERE project = $1").bind(&project).fetch_one(&mut *conn).await?;
        let (events,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM events WHERE project = $1").bind(&project).fetch_one(&mut *conn).await?;
        Ok(Some(baton_proto::v1::ProjectStats {
            project,
            head_revision,
            sessions: statuses
                .into_iter()
                .map(|(status, n)| {
                    let name = baton_proto::v1::SessionStatus::try_from(status).map_or("unknown", |s| s.as_str_name());
                    (name.trim_start_matches("SESSION_STATUS_").to_ascii_lowercase(), n)
                })
                .collect(),
            checkpoints,
            checkpoint_bytes,
            memory_entries,
            events,
            oldest_kept_revision: events_from,
            chunks,
            chunk_bytes,
        }))
    }
}
