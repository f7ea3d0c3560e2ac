-- Every statement that creates deliveries no worker holds yet wakes the
-- workers of every replica (LISTEN oncehook_deliveries); the ones a commit
-- hands off to its own worker need nobody else. It is a trigger, not a pg_notify() inside the
-- claim statement: the planner dropped that CTE, whose result nothing used,
-- and no claim woke anyone. A trigger cannot be optimised away. Channels are
-- shared by every schema of a database: the payload names this one.
CREATE FUNCTION oncehook_notify_deliveries() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM new_deliveries WHERE lease_token IS NULL) THEN
        PERFORM pg_notify('oncehook_deliveries', current_schema());
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER deliveries_notify
    AFTER INSERT ON deliveries
    REFERENCING NEW TABLE AS new_deliveries
    FOR EACH STATEMENT EXECUTE FUNCTION oncehook_notify_deliveries();
