# The Keras 3.15 values of tests/keras/test_functional_multi.cpp: seven functional models with
# calls of several inputs or outputs (LSTM/GRU return_state and initial_state, Bidirectional
# return_state, MultiHeadAttention/GroupQueryAttention/Attention/AdditiveAttention on a query, a value and a key,
# with scores, causal masks and an attention_mask input, Keras masks), their outputs on fixed weights and inputs, and
# their model.to_json() (tests/keras/functional_multi_keras_json.h, in 88-character pieces).
#   python functional_multi_reference.py  (keras 3.15, tensorflow 2.21)
import os; os.environ["TF_CPP_MIN_LOG_LEVEL"]="3"
import keras, json, numpy as np
L=keras.layers
def fill(m):
    ws=[]
    for k,w in enumerate(m.get_weights()):
        ws.append((0.1*np.sin(np.arange(w.size)+k)).reshape(w.shape).astype(np.float32))
    m.set_weights(ws)
def ramp(shape, scale):
    return (np.arange(int(np.prod(shape)))/scale).reshape(shape).astype(np.float32)
def pr(name, a):
    a=np.asarray(a).ravel()
    print("const std::vector<double> %s = {%s};" % (name, ", ".join(repr(float(x)) for x in a)))
json_out={}
# A: seq2seq
enc=keras.Input((5,3),name="enc"); dec=keras.Input((4,2),name="dec")
o,h,c=L.LSTM(4,return_state=True,name="enc_lstm")(enc)
seq=L.LSTM(4,return_sequences=True,name="dec_lstm")(dec,initial_state=[h,c])
g,gh=L.GRU(3,return_state=True,name="gru")(seq)
y=L.Dense(2,name="proj")(seq)
A=keras.Model([enc,dec],[y,h,gh],name="seq2seq"); fill(A)
xa=[ramp((2,5,3),20), ramp((2,4,2),10)]
ra=A.predict(xa,verbose=0)
for i,r in enumerate(ra): pr("kA%d"%i, r)
print("// A weights:", [w.shape for w in A.get_weights()])
json_out["A"] = A.to_json()
# B: attention
q=keras.Input((4,6),name="q"); v=keras.Input((5,3),name="v"); k=keras.Input((5,2),name="k"); v2=keras.Input((5,6),name="v2")
o1,s1=L.MultiHeadAttention(2,3,name="mha")(q,v,k,return_attention_scores=True)
o2=L.MultiHeadAttention(2,3,name="mha_causal")(q,q,use_causal_mask=True)
o3,s3=L.Attention(use_scale=True,name="att")([q,v2],return_attention_scores=True)
o4=L.AdditiveAttention(name="add")([q,v2,v2], use_causal_mask=True)
B=keras.Model([q,v,k,v2],[o1,s1,o2,o3,s3,o4],name="cross"); fill(B)
xb=[ramp((2,4,6),50), ramp((2,5,3),30), ramp((2,5,2),20), ramp((2,5,6),60)]
rb=B.predict(xb,verbose=0)
for i,r in enumerate(rb): pr("kB%d"%i, r)
json_out["B"] = B.to_json()
# C: masks
t=keras.Input((5,),dtype="int32",name="tokens")
e=L.Embedding(7,3,mask_zero=True,name="emb")(t)
so,sh,sc=L.LSTM(4,return_sequences=True,return_state=True,name="lstm")(e)
pool=L.GlobalAveragePooling1D(name="pool")(so)
att=L.MultiHeadAttention(1,2,name="self")(so,e)
pool2=L.GlobalAveragePooling1D(name="pool2")(att)
C=keras.Model(t,[pool,sh,pool2],name="masked"); fill(C)
xc=np.array([[1,2,3,0,0],[4,5,6,6,0]],dtype=np.int32)
rc=C.predict(xc,verbose=0)
for i,r in enumerate(rc): pr("kC%d"%i, r)
json_out["C"] = C.to_json()
# D: bidirectional return_state
x=keras.Input((4,2),name="x")
bo,fh,fc,bh,bc=L.Bidirectional(L.LSTM(3,return_state=True),name="bi")(x)
d2=L.LSTM(3,name="dec2")(x,initial_state=[bh,bc])
D=keras.Model(x,[bo,fh,bc,d2],name="bid"); fill(D)
rd=D.predict(ramp((2,4,2),10),verbose=0)
for i,r in enumerate(rd): pr("kD%d"%i, r)
json_out["D"] = D.to_json()
# E: MultiHeadAttention with an attention_mask input
q=keras.Input((4,6),name="q"); v=keras.Input((5,3),name="v"); am=keras.Input((4,5),dtype="int32",name="am")
o,sc=L.MultiHeadAttention(2,3,name="mha")(q,v,attention_mask=am,return_attention_scores=True)
E=keras.Model([q,v,am],[o,sc],name="masked_mha"); fill(E)
mask=np.array([[[1,1,0,0,0],[1,1,1,0,0],[1,1,1,1,0],[1,1,1,1,1]],[[1,0,1,0,1]]*4],dtype=np.int32)
re_=E.predict([ramp((2,4,6),50), ramp((2,5,3),30), mask],verbose=0)
for i,r in enumerate(re_): pr("kE%d"%i, r)
json_out["E"] = E.to_json()
# F: Masking before an LSTM (Keras writes NotEqual and Any operations for its mask)
x=keras.Input((5,3),name="x")
so,sh,sc=L.LSTM(4,return_sequences=True,return_state=True,name="lstm")(L.Masking(0.0,name="masking")(x))
F=keras.Model(x,[so,sh],name="masking_lstm"); fill(F)
xf=ramp((2,5,3),20); xf[0,3:]=0; xf[1,1]=0
rf=F.predict(xf,verbose=0)
for i,r in enumerate(rf): pr("kF%d"%i, r)
json_out["F"] = F.to_json()
# G: GroupQueryAttention on a query, a value and a key, with scores and a causal mask
q=keras.Input((4,6),name="q"); v=keras.Input((5,6),name="v"); k=keras.Input((5,6),name="k")
go,gs=L.GroupQueryAttention(2,4,2,name="gqa")(q,v,k,use_causal_mask=True,return_attention_scores=True)
G=keras.Model([q,v,k],[go,gs],name="gqa_cross"); fill(G)
rg=G.predict([ramp((2,4,6),50), ramp((2,5,6),30), ramp((2,5,6),20)],verbose=0)
for i,r in enumerate(rg): pr("kG%d"%i, r)
json_out["G"] = G.to_json()
for k, text in json_out.items():
    print("const char* const kJson%s =" % k)
    print("\n".join('    R"k(%s)k"' % text[i:i + 88] for i in range(0, len(text), 88)) + ";")
