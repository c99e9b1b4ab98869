# trainer/model/local.mk - the model: its sequence, parameters and
# activations.
libsa1b_train_la_SOURCES += trainer/model/model_seq.c trainer/model/model_params.c trainer/model/model_layout.c
noinst_HEADERS += trainer/model/model.h trainer/model/model_params.h trainer/model/model_layout.h
