#include "tap.h"
int main(void){tap_skip_all("todo");}
