# Keras 3.15.1 / TF 2.21 reference values for tests/keras/test_attention.cpp (the tests do not
# run it). Run with TensorFlow 2.21 and Keras 3.15 installed:
#   python tests/keras/attention_reference.py > ref.txt
# and paste the "// MHA" entries into kMha, the "// Attention" ones into kAttention.
import numpy as np, keras, tensorflow as tf
from keras.src import backend
keras.config.set_floatx("float64")

def pattern(shape, k):
    n = int(np.prod(shape)); i = np.arange(n, dtype=np.float64)
    return (0.5 * np.sin(0.7 * i + 1.0 + k)).reshape(shape)
def inp(shape, j):
    n = int(np.prod(shape)); i = np.arange(n, dtype=np.float64)
    return np.cos(0.37 * i + 0.2 + j).reshape(shape)

def fmt(a):
    items = [repr(float(x)) for x in np.asarray(a).ravel()]
    lines, cur = [], "      {"
    for j, it in enumerate(items):
        piece = it + ("," if j + 1 < len(items) else "},")
        if len(cur) + len(piece) + 1 > 100:
            lines.append(cur.rstrip()); cur = "       "
        cur += piece + " "
    lines.append(cur.rstrip())
    return "\n".join(lines)

B, T, S = 2, 3, 4
Q = inp((B, T, 4), 0); V = inp((B, S, 5), 1); K = inp((B, S, 6), 2)
AM = np.ones((B, T, S)); AM[1, 2, :] = 0; AM[0, 1, 3] = 0; AM[0, 0, 1] = 0
VM = np.array([[1, 1, 1, 0], [0, 1, 1, 1]], bool)
QM = np.array([[1, 1, 0], [1, 0, 0]], bool)

def mha_case(name, kw, self_attn, key, scores, q_in=None, v_in=None, **call):
    layer = keras.layers.MultiHeadAttention(2, 2, **kw)
    q = tf.constant(Q if q_in is None else q_in)
    v = q if self_attn else tf.constant(V if v_in is None else v_in)
    k = tf.constant(K) if key else None
    if "query_mask" in call:
        qm = call.pop("query_mask")
    else:
        qm = None
    layer(q, v, k) if k is not None else layer(q, v)
    ws = [pattern(w.shape, i) for i, w in enumerate(layer.weights)]
    layer.set_weights(ws)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([q, v] + ([k] if k is not None else []))
        if qm is not None:
            backend.set_keras_mask(q, tf.constant(qm))
        args = dict(call)
        if k is not None: args["key"] = k
        res = layer(q, v, return_attention_scores=scores, **args)
        outs = list(res) if scores else [res]
        loss = 0
        for j, o in enumerate(outs):
            loss += tf.reduce_sum(o * pattern(o.shape, 20 + j))
    srcs = [q] if self_attn else [q, v]
    if k is not None: srcs.append(k)
    gs = [tape.gradient(loss, s) for s in srcs] + [tape.gradient(loss, w) for w in layer.trainable_weights]
    print(f'    {{"{name}",')
    print("     {")
    for o in outs: print(fmt(o.numpy()))
    print("     },")
    print("     {")
    for g in gs: print(fmt(g.numpy()))
    print("     }},")

print("// MHA")
mha_case("self_scores", {"value_dim": 3}, True, False, True)
mha_case("cross_mask", {"value_dim": 3}, False, True, False, attention_mask=AM)
mha_case("cross_mask_scores", {"value_dim": 3}, False, True, True, attention_mask=AM)
mha_case("causal_value_mask_scores", {"value_dim": 3}, False, False, True, use_causal_mask=True, value_mask=VM)
mha_case("causal_value_mask", {"value_dim": 3}, False, False, False, use_causal_mask=True, value_mask=VM)
mha_case("causal_self", {}, True, False, False, use_causal_mask=True)
mha_case("output_shape_no_bias", {"value_dim": 3, "output_shape": 7, "use_bias": False}, True, False, False)
mha_case("query_mask", {"value_dim": 3}, False, True, False, query_mask=QM, key_mask=VM)
mha_case("query_mask_scores", {"value_dim": 3}, False, True, True, query_mask=QM, key_mask=VM)
# Rank-4 inputs (batch, 2, T|S, features): the default attention axes (1, 2) and axis 2 alone.
Q4 = inp((B, 2, T, 4), 6); V4 = inp((B, 2, S, 5), 7)
AM4 = np.ones((B, 2, T, S)); AM4[1, 0, 2, :] = 0; AM4[0, 1, 0, 2] = 0
mha_case("rank4_default_scores", {"value_dim": 3}, False, False, True, q_in=Q4, v_in=V4)
mha_case("rank4_axis2_mask", {"value_dim": 3, "attention_axes": (2,)}, False, False, False,
         q_in=Q4, v_in=V4, attention_mask=AM4)

QA = inp((B, T, 4), 3); VA = inp((B, S, 3), 4); KA = inp((B, S, 4), 5)
VMA = np.array([[1, 1, 0, 0], [0, 0, 0, 0]], bool)
QMA = np.array([[1, 1, 0], [1, 1, 1]], bool)
def att_case(name, layer, weights, key, masks, scores, **call):
    q = tf.constant(QA); v = tf.constant(VA); k = tf.constant(KA)
    ins = [q, v, k] if key else [q, k]
    layer(ins)
    if weights is not None:
        layer.set_weights(weights)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(ins)
        res = layer(ins, mask=masks, return_attention_scores=scores, **call)
        outs = list(res) if scores else [res]
        loss = 0
        for j, o in enumerate(outs):
            loss += tf.reduce_sum(o * pattern(o.shape, 20 + j))
    gs = [tape.gradient(loss, s) for s in ins] + [tape.gradient(loss, w) for w in layer.trainable_weights]
    print(f'    {{"{name}",')
    print("     {")
    for o in outs: print(fmt(o.numpy()))
    print("     },")
    print("     {")
    for g in gs: print(fmt(g.numpy()))
    print("     }},")

print("// Attention")
att_case("dot", keras.layers.Attention(), None, False, None, True)
att_case("dot_scale_masks", keras.layers.Attention(use_scale=True), [np.array(0.7)], True, [QMA, VMA], True)
att_case("concat_causal", keras.layers.Attention(use_scale=True, score_mode="concat"),
         [np.array(0.8), np.array(1.3)], False, [None, VM], True, use_causal_mask=True)
att_case("concat_noscale", keras.layers.Attention(score_mode="concat"), [np.array(1.3)], True, None, False)
att_case("additive_masks_causal", keras.layers.AdditiveAttention(), [pattern((4,), 0)], True, [QMA, VM], True, use_causal_mask=True)
att_case("additive_noscale", keras.layers.AdditiveAttention(use_scale=False), None, False, None, True)
