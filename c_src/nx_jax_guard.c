/*
 * NxJax.Guard: a reference whose garbage collection sends a message.
 *
 * The BEAM frees a term's memory without telling anyone; only a NIF resource has a
 * destructor. A guard is such a resource holding a destination pid and a message: when the
 * last reference to it is gone (every process that held it collected it, or exited), its
 * destructor sends the message, once. disarm/2 takes the message back first (the tensor was
 * freed by hand, or donated), so the destructor then sends nothing; the reason is kept and
 * status/1 reads it.
 *
 * The message lives in an environment of its own, allocated by new/2 and handed over to
 * exactly one owner by an atomic exchange of the pointer: disarm/2 or the destructor. That
 * pointer is the whole of the guard's mutable state, so no lock is needed.
 */
#include <erl_nif.h>

typedef struct {
    ErlNifPid dest;
    ErlNifEnv *msg_env; /* NULL once sent or disarmed */
    ERL_NIF_TERM msg;   /* a term of msg_env */
    ERL_NIF_TERM reason; /* an atom: why it was disarmed (atoms need no environment) */
} guard_t;

static ErlNifResourceType *guard_type;
static ERL_NIF_TERM atom_armed, atom_true, atom_false;

static void guard_dtor(ErlNifEnv *caller_env, void *obj)
{
    guard_t *guard = obj;
    ErlNifEnv *msg_env = __atomic_exchange_n(&guard->msg_env, NULL, __ATOMIC_ACQ_REL);

    if (msg_env != NULL) {
        /* a dead destination drops the message: nothing to free any more */
        enif_send(caller_env, &guard->dest, msg_env, guard->msg);
        enif_free_env(msg_env);
    }
}

static int load(ErlNifEnv *env, void **priv, ERL_NIF_TERM info)
{
    (void)priv;
    (void)info;
    guard_type = enif_open_resource_type(env, NULL, "nx_jax_guard", guard_dtor,
                                         ERL_NIF_RT_CREATE, NULL);
    atom_armed = enif_make_atom(env, "armed");
    atom_true = enif_make_atom(env, "true");
    atom_false = enif_make_atom(env, "false");
    return guard_type == NULL ? 1 : 0;
}

static int upgrade(ErlNifEnv *env, void **priv, void **old_priv, ERL_NIF_TERM info)
{
    (void)old_priv;
    return load(env, priv, info);
}

/* new(pid, message): a guard that sends `message` to the local process `pid` when collected */
static ERL_NIF_TERM guard_new(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    ErlNifPid dest;
    guard_t *guard;
    ERL_NIF_TERM term;

    (void)argc;
    if (!enif_get_local_pid(env, argv[0], &dest))
        return enif_make_badarg(env);
    guard = enif_alloc_resource(guard_type, sizeof(guard_t));
    if (guard == NULL)
        return enif_raise_exception(env, enif_make_atom(env, "enomem"));
    guard->dest = dest;
    guard->reason = atom_armed;
    guard->msg_env = enif_alloc_env();
    if (guard->msg_env == NULL) {
        enif_release_resource(guard);
        return enif_raise_exception(env, enif_make_atom(env, "enomem"));
    }
    guard->msg = enif_make_copy(guard->msg_env, argv[1]);
    term = enif_make_resource(env, guard);
    enif_release_resource(guard); /* the term holds it now */
    return term;
}

/* disarm(guard, reason): true when this call took the message back (the first to do so) */
static ERL_NIF_TERM guard_disarm(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    guard_t *guard;
    ErlNifEnv *msg_env;

    (void)argc;
    if (!enif_get_resource(env, argv[0], guard_type, (void **)&guard) || !enif_is_atom(env, argv[1]))
        return enif_make_badarg(env);
    msg_env = __atomic_exchange_n(&guard->msg_env, NULL, __ATOMIC_ACQ_REL);
    if (msg_env == NULL)
        return atom_false;
    __atomic_store_n(&guard->reason, argv[1], __ATOMIC_RELEASE);
    enif_free_env(msg_env);
    return atom_true;
}

/* status(guard): :armed, or the reason it was disarmed with */
static ERL_NIF_TERM guard_status(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    guard_t *guard;

    (void)argc;
    if (!enif_get_resource(env, argv[0], guard_type, (void **)&guard))
        return enif_make_badarg(env);
    return __atomic_load_n(&guard->reason, __ATOMIC_ACQUIRE);
}

static ErlNifFunc functions[] = {
    {"new", 2, guard_new, 0},
    {"disarm", 2, guard_disarm, 0},
    {"status", 1, guard_status, 0},
};

ERL_NIF_INIT(Elixir.NxJax.Guard, functions, load, NULL, upgrade, NULL)
