-- Ticket reservations: the seats of each event, and one outcome per reservation request.
-- reserve() is the whole transaction a request makes, in one round trip from either handler.

CREATE TABLE IF NOT EXISTS seats (
    event_id   integer NOT NULL,
    seat_no    integer NOT NULL,
    owner      text,                      -- the user holding the seat; NULL while free
    request_id text UNIQUE,               -- the request that reserved it
    PRIMARY KEY (event_id, seat_no)
);

-- The free seats in order, so "any seat" finds the lowest free one without walking past
-- every seat already taken.
CREATE INDEX IF NOT EXISTS seats_free ON seats (event_id, seat_no) WHERE owner IS NULL;

CREATE TABLE IF NOT EXISTS outcomes (
    request_id  text PRIMARY KEY,         -- a redelivered request finds its outcome here
    user_id     text NOT NULL,
    event_id    integer NOT NULL,
    wanted_seat integer,                  -- NULL: any seat
    seat_no     integer,                  -- the seat reserved; NULL unless status = 'reserved'
    status      text NOT NULL CHECK (status IN ('reserved', 'sold_out', 'seat_taken')),
    produced_at timestamptz NOT NULL,     -- when the request was produced (the record timestamp)
    done_at     timestamptz NOT NULL      -- when its transaction wrote the outcome
);

-- Reserve a seat for a request, exactly once per request id: check availability, reserve
-- (the wanted seat, or the lowest free one), record the outcome. Returns the outcome's
-- status; a request that already has an outcome returns that one and changes nothing.
--
-- Seats locked by a concurrent reservation are skipped, not waited for; when every free
-- seat is locked, this polls until they commit or roll back, so "sold_out" means every seat
-- is taken by a committed reservation. Two copies of one request running at once (a
-- redelivery while the first copy still runs) cannot both succeed: the second one's INSERT
-- waits for the first to commit and then fails with a unique violation, which rolls back
-- its seat too; the handler raises, laneway retries, and the retry returns the first
-- outcome. One read and two writes per request: the outcome is written once, at the end.
CREATE OR REPLACE FUNCTION reserve(
    p_request text, p_user text, p_event integer, p_seat integer, p_produced timestamptz
) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    got integer;
    result text;
BEGIN
    SELECT status INTO result FROM outcomes WHERE request_id = p_request;
    IF FOUND THEN
        RETURN result;
    END IF;
    IF p_seat IS NULL THEN
        LOOP
            SELECT seat_no INTO got FROM seats
                WHERE event_id = p_event AND owner IS NULL
                ORDER BY seat_no LIMIT 1 FOR UPDATE SKIP LOCKED;
            EXIT WHEN got IS NOT NULL;
            EXIT WHEN NOT EXISTS (SELECT 1 FROM seats WHERE event_id = p_event AND owner IS NULL);
            PERFORM pg_sleep(0.001);  -- every free seat is locked by a reservation in progress
        END LOOP;
    ELSE
        SELECT seat_no INTO got FROM seats
            WHERE event_id = p_event AND seat_no = p_seat AND owner IS NULL FOR UPDATE;
    END IF;
    IF got IS NULL THEN
        result := CASE WHEN p_seat IS NULL THEN 'sold_out' ELSE 'seat_taken' END;
    ELSE
        UPDATE seats SET owner = p_user, request_id = p_request
            WHERE event_id = p_event AND seat_no = got;
        result := 'reserved';
    END IF;
    INSERT INTO outcomes (request_id, user_id, event_id, wanted_seat, seat_no, status,
                          produced_at, done_at)
        VALUES (p_request, p_user, p_event, p_seat, got, result, p_produced, clock_timestamp());
    RETURN result;
END;
$$;
