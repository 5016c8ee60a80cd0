-- memory_items_by_user_model serves SearchVector, which reads the vectors of
-- one user's items of one model and dimension: without it the planner scans
-- every item of the tenant's model and fetches each row to check its user.
CREATE INDEX memory_items_by_user_model ON memory_items (tenant, user_id, model, dims);
